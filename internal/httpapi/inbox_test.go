package httpapi_test

import (
	"encoding/json"
	"net/url"
	"testing"

	chat "github.com/chatd/chatd"
)

// inboxModel is what the inbox must say, kept beside the real calls.
type inboxModel struct {
	members  map[int64][]int64         // conversation -> users
	lastSeq  map[int64]int64           // conversation -> last seq
	lastBody map[int64]string          // conversation -> last body
	order    map[int64]int             // conversation -> index of its last send
	read     map[int64]map[int64]int64 // conversation -> user -> watermark
}

// TestInbox checks unread counts after sends and reads by several users,
// the order by last message, and cursor paging without duplicates or holes,
// over HTTP and RPC.
func TestInbox(t *testing.T) {
	e := newEnv(t)
	m := inboxModel{members: map[int64][]int64{}, lastSeq: map[int64]int64{}, lastBody: map[int64]string{},
		order: map[int64]int{}, read: map[int64]map[int64]int64{}}
	add := func(id int64, users ...int64) int64 {
		m.members[id] = users
		m.read[id] = map[int64]int64{}
		return id
	}
	direct := func(a, b int64) int64 {
		var c chat.Conversation
		e.must(201, a, "POST", pathf("/v1/direct/%d", b), nil, &c)
		return add(c.ID, a, b)
	}
	convs := []int64{
		add(e.group(1, 2, 3), 1, 2, 3),
		add(e.group(1, 2), 1, 2),
		direct(1, 2),
		direct(1, 3),
		add(e.group(1, 3, 4), 1, 3, 4),
		add(e.group(1, 2, 3, 4), 1, 2, 3, 4),
		direct(1, 4),
		add(e.group(2, 3), 2, 3),
	}
	markRead := func(user, conv, seq int64) {
		var rr chat.ReadResult
		e.must(200, user, "POST", pathf("/v1/conversations/%d/read", conv), map[string]int64{"seq": seq}, &rr)
		want := min(seq, m.lastSeq[conv])
		advanced := want > m.read[conv][user]
		if rr.Advanced != advanced || (advanced && rr.LastReadSeq != want) {
			t.Fatalf("user %d read %d in %d: %+v, want advanced=%v to %d", user, seq, conv, rr, advanced, want)
		}
		if advanced {
			m.read[conv][user] = want
		}
	}
	step := 0
	send := func(user, conv int64) {
		step++
		body := pathf("step %d by %d", step, user)
		rep := e.sendMsg(user, conv, newID(), body)
		m.lastSeq[conv]++
		if rep.Seq != m.lastSeq[conv] {
			t.Fatalf("send to %d: seq %d, want %d", conv, rep.Seq, m.lastSeq[conv])
		}
		m.lastBody[conv], m.order[conv] = body, step
		// Sending reads everything up to one's own message (store contract:
		// the sender's watermark moves with the send).
		m.read[conv][user] = rep.Seq
	}
	// Every conversation gets a message, in an order unlike creation.
	for _, i := range []int{3, 0, 7, 5, 1, 6, 2, 4} {
		send(m.members[convs[i]][len(m.members[convs[i]])-1], convs[i])
	}
	script := []struct {
		user int64
		conv int
	}{
		{2, 0}, {3, 0}, {1, 0}, {2, 1}, {2, 1}, {1, 5}, {4, 5}, {3, 3}, {2, 7}, {4, 6}, {1, 4}, {3, 4}, {2, 2},
	}
	for _, s := range script {
		send(s.user, convs[s.conv])
	}
	markRead(2, convs[0], 2)    // partly
	markRead(3, convs[5], 1000) // past the end: clamped to last seq
	markRead(3, convs[5], 1)    // backwards: does not move
	markRead(4, convs[4], m.lastSeq[convs[4]])

	for _, user := range []int64{1, 2, 3, 4} {
		var page chat.InboxPage
		e.must(200, user, "GET", "/v1/inbox?limit=200", nil, &page)
		if page.NextCursor != "" {
			t.Errorf("user %d: one full page has a next cursor", user)
		}
		var want []int64
		for _, c := range convs {
			for _, u := range m.members[c] {
				if u == user {
					want = append(want, c)
				}
			}
		}
		sortByLastSend(want, m.order)
		if got := ids(page.Conversations); !equal(got, want) {
			t.Fatalf("user %d: inbox order %v, want %v", user, got, want)
		}
		for _, c := range page.Conversations {
			wantUnread := m.lastSeq[c.ID] - m.read[c.ID][user]
			if c.LastSeq != m.lastSeq[c.ID] || c.LastReadSeq != m.read[c.ID][user] || c.Unread != wantUnread {
				t.Errorf("user %d conv %d: lastSeq %d lastRead %d unread %d, want %d %d %d", user, c.ID,
					c.LastSeq, c.LastReadSeq, c.Unread, m.lastSeq[c.ID], m.read[c.ID][user], wantUnread)
			}
			if c.LastMessage == nil || c.LastMessage.Seq != c.LastSeq || c.LastMessage.Body != m.lastBody[c.ID] || c.LastMessageAt == nil {
				t.Errorf("user %d conv %d: last message %+v, want seq %d %q", user, c.ID, c.LastMessage, c.LastSeq, m.lastBody[c.ID])
			}
		}
	}

	// Cursor paging returns the full list in order, without duplicates or
	// holes, for page sizes that do and do not divide it.
	var full chat.InboxPage
	e.must(200, 1, "GET", "/v1/inbox", nil, &full)
	for _, limit := range []int{1, 2, 3, 7} {
		var got []int64
		cursor := ""
		for pages := 0; ; pages++ {
			if pages > 20 {
				t.Fatalf("limit %d: cursor never ends", limit)
			}
			var p chat.InboxPage
			if limit%2 == 1 {
				e.must(200, 1, "GET", pathf("/v1/inbox?limit=%d&cursor=%s", limit, url.QueryEscape(cursor)), nil, &p)
			} else {
				payload, _ := json.Marshal(map[string]any{"limit": limit, "cursor": cursor})
				rr := e.rpc(1, "inbox", string(payload))
				if rr.status != 200 {
					t.Fatalf("rpc inbox: %s", rr.raw)
				}
				decodeInto(t, rr.raw, &p)
			}
			if len(p.Conversations) > limit {
				t.Fatalf("limit %d: page of %d", limit, len(p.Conversations))
			}
			got = append(got, ids(p.Conversations)...)
			if p.NextCursor == "" {
				break
			}
			cursor = p.NextCursor
		}
		if want := ids(full.Conversations); !equal(got, want) {
			t.Errorf("limit %d: paged %v, want %v", limit, got, want)
		}
	}

	// A new message moves its conversation to the top.
	oldest := full.Conversations[len(full.Conversations)-1].ID
	e.sendMsg(1, oldest, newID(), "bump")
	var top chat.InboxPage
	e.must(200, 1, "GET", "/v1/inbox?limit=1", nil, &top)
	if len(top.Conversations) != 1 || top.Conversations[0].ID != oldest || top.NextCursor == "" {
		t.Errorf("after a send to %d the inbox starts with %+v", oldest, top)
	}
}

func ids(es []chat.InboxEntry) []int64 {
	out := make([]int64, len(es))
	for i, e := range es {
		out[i] = e.ID
	}
	return out
}

func sortByLastSend(convs []int64, order map[int64]int) {
	for i := 1; i < len(convs); i++ {
		for j := i; j > 0 && order[convs[j]] > order[convs[j-1]]; j-- {
			convs[j], convs[j-1] = convs[j-1], convs[j]
		}
	}
}

func equal(a, b []int64) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

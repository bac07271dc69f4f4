package httpapi_test

import (
	"context"
	"testing"

	chat "github.com/chatd/chatd"
	"github.com/chatd/chatd/internal/httpapi"
)

// TestHistoryPaging walks 1,000 messages backwards with beforeSeq and
// forwards with afterSeq, over HTTP and RPC, and expects each seq exactly
// once and in order.
func TestHistoryPaging(t *testing.T) {
	e := newEnv(t)
	g := e.group(owner, member)
	const n = 1000
	// Through the Service: 1,000 HTTP round trips would test nothing more.
	for i := 0; i < n; i++ {
		sender := owner
		if i%3 == 0 {
			sender = member
		}
		if _, err := e.svc.Send(context.Background(), chat.SendRequest{
			ConversationID: g, SenderID: sender, ClientMsgID: newID(), Body: "m",
		}); err != nil {
			t.Fatalf("send %d: %v", i, err)
		}
	}

	page := func(query string) []chat.Message {
		var h httpapi.HistoryReply
		e.must(200, member, "GET", pathf("/v1/conversations/%d/messages%s", g, query), nil, &h)
		return h.Messages
	}

	// Default limit 50, newest first page, ascending within.
	first := page("")
	if len(first) != chat.DefaultHistoryLimit || first[0].Seq != n-49 || first[49].Seq != n {
		t.Fatalf("default page: %d messages, %d..%d", len(first), first[0].Seq, first[len(first)-1].Seq)
	}
	// Over the maximum is clamped, not an error.
	if got := page("?limit=100000"); len(got) != chat.MaxHistoryLimit {
		t.Fatalf("limit=100000 gave %d messages, want %d", len(got), chat.MaxHistoryLimit)
	}

	for _, limit := range []int{200, 37} {
		// Backwards: each page ends just below the previous page's first.
		var seqs []int64
		before := int64(0)
		for {
			q := pathf("?limit=%d", limit)
			if before > 0 {
				q += pathf("&beforeSeq=%d", before)
			}
			msgs := page(q)
			if len(msgs) == 0 {
				break
			}
			checkAscending(t, msgs)
			for i := len(msgs) - 1; i >= 0; i-- {
				seqs = append(seqs, msgs[i].Seq)
			}
			before = msgs[0].Seq
		}
		for i, s := range seqs {
			if s != int64(n-i) {
				t.Fatalf("backwards limit %d: position %d has seq %d, want %d", limit, i, s, n-i)
			}
		}
		if len(seqs) != n {
			t.Fatalf("backwards limit %d: %d messages, want %d", limit, len(seqs), n)
		}

		// Forwards with afterSeq, over RPC this time. The walk starts after
		// seq 1, fetched as the one message before seq 2 (afterSeq=0 would
		// start at seq 1 too: TestHistoryAfterSeqZeroStartsAtTheFirstMessage).
		oldest := page("?beforeSeq=2")
		if len(oldest) != 1 || oldest[0].Seq != 1 {
			t.Fatalf("beforeSeq=2: %+v", oldest)
		}
		seqs = append(seqs[:0], 1)
		after := int64(1)
		for {
			rr := e.rpc(member, "history", pathf(`{"conversationId":%d,"afterSeq":%d,"limit":%d}`, g, after, limit))
			var h httpapi.HistoryReply
			if rr.status != 200 {
				t.Fatalf("rpc history: %s", rr.raw)
			}
			decodeInto(t, rr.raw, &h)
			if len(h.Messages) == 0 {
				break
			}
			checkAscending(t, h.Messages)
			for _, m := range h.Messages {
				seqs = append(seqs, m.Seq)
			}
			after = h.Messages[len(h.Messages)-1].Seq
		}
		for i, s := range seqs {
			if s != int64(i+1) {
				t.Fatalf("forwards limit %d: position %d has seq %d, want %d", limit, i, s, i+1)
			}
		}
		if len(seqs) != n {
			t.Fatalf("forwards limit %d: %d messages, want %d", limit, len(seqs), n)
		}
	}
}

func checkAscending(t *testing.T, msgs []chat.Message) {
	t.Helper()
	for i := 1; i < len(msgs); i++ {
		if msgs[i].Seq != msgs[i-1].Seq+1 {
			t.Fatalf("page not ascending without gaps: %d then %d", msgs[i-1].Seq, msgs[i].Seq)
		}
	}
}

// TestHistoryAfterSeqZeroStartsAtTheFirstMessage: afterSeq=0 is given, so it
// pages forward from seq 1 (a client catching up from nothing), over HTTP
// and RPC alike, and never means "the newest page"; with a beforeSeq it is
// "both" (400). docs/openapi.yaml once said 0 meant "not given".
func TestHistoryAfterSeqZeroStartsAtTheFirstMessage(t *testing.T) {
	e := newEnv(t)
	g := e.group(owner, member)
	for i := 0; i < 5; i++ {
		e.sendMsg(owner, g, newID(), "m")
	}
	var h httpapi.HistoryReply
	e.must(200, member, "GET", pathf("/v1/conversations/%d/messages?afterSeq=0&limit=2", g), nil, &h)
	if len(h.Messages) != 2 || h.Messages[0].Seq != 1 || h.Messages[1].Seq != 2 {
		t.Fatalf("afterSeq=0&limit=2: %+v, want seqs 1 and 2", h.Messages)
	}
	rr := e.rpc(member, "history", pathf(`{"conversationId":%d,"afterSeq":0,"limit":2}`, g))
	var hr httpapi.HistoryReply
	decodeInto(t, rr.raw, &hr)
	if rr.status != 200 || len(hr.Messages) != 2 || hr.Messages[0].Seq != 1 {
		t.Fatalf("rpc afterSeq 0: %s", rr.raw)
	}
	e.must(200, member, "GET", pathf("/v1/conversations/%d/messages?afterSeq=&limit=2", g), nil, &h)
	if len(h.Messages) != 2 || h.Messages[0].Seq != 4 {
		t.Fatalf("afterSeq= (absent): %+v, want the newest page 4..5", h.Messages)
	}
	if r := e.do(member, "GET", pathf("/v1/conversations/%d/messages?beforeSeq=3&afterSeq=0", g), nil); r.status != 400 || r.errorCode() != "invalid" {
		t.Fatalf("beforeSeq=3&afterSeq=0: %d %s", r.status, r.body)
	}
}

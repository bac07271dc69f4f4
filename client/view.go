package client

import (
	"slices"
	"sync"
	"time"
)

// View is what an app renders of its conversations: every message's
// current body, whether it was edited or recalled, what it replies to or
// forwards, and its reactions. It is built by applying the entries of each
// conversation's stream in seq order, as Events delivers them (or as
// history pages them forward), so a client that was offline converges to
// exactly the view of one that was online. Older pages (scrolling back)
// are added with ApplyHistory too. Safe for concurrent use.
type View struct {
	me    int64
	mu    sync.Mutex
	convs map[int64]map[int64]*MessageView
	have  map[int64]int64
	// orphans are the latest changes (at most maxOrphans a conversation)
	// to messages the view does not hold yet: an older page read before
	// one of them committed and applied after it arrived shows its
	// message as it was, and they bring it up to date.
	orphans map[int64][]Event
}

// maxOrphans bounds the changes kept per conversation for messages the
// view does not hold: far more than arrive while a page is on its way.
const maxOrphans = 1024

// MessageView is one message as the app shows it.
type MessageView struct {
	ConversationID int64
	Seq            int64
	SenderID       int64
	ClientMsgID    string
	Body           string // empty once recalled
	CreatedAt      time.Time
	EditedAt       *time.Time
	Recalled       bool
	ReplyTo        *ReplyRef
	ForwardedFrom  *ForwardRef
	// Reactions, in the order the emoji first appeared; Me says the
	// viewer set it.
	Reactions []Reaction
}

// NewView returns an empty view for user me (whose reactions are "Me").
func NewView(me int64) *View {
	return &View{me: me, convs: map[int64]map[int64]*MessageView{}, have: map[int64]int64{}, orphans: map[int64][]Event{}}
}

// Apply applies one event; events that are not entries of a stream, and
// entries at or below what the view already applied for their
// conversation, change nothing.
func (v *View) Apply(ev Event) {
	if !isEntry(ev.Type) || ev.ConversationID <= 0 || ev.Seq <= 0 {
		return
	}
	v.mu.Lock()
	defer v.mu.Unlock()
	if ev.Seq <= v.have[ev.ConversationID] {
		return
	}
	v.have[ev.ConversationID] = ev.Seq
	msgs := v.messagesOf(ev.ConversationID)
	if ev.Type == EventMessageNew {
		msgs[ev.Seq] = newMessageView(ev)
		return
	}
	if ev.TargetSeq <= 0 {
		// A system entry: it changes no message (it is not kept for one
		// either: it would push changes waiting for their messages out).
		return
	}
	m := msgs[ev.TargetSeq]
	if m == nil {
		// A message the view does not hold (older than what it was
		// given): kept for an older page that brings it.
		o := append(v.orphans[ev.ConversationID], ev)
		v.orphans[ev.ConversationID] = o[max(0, len(o)-maxOrphans):]
		v.followAbsent(msgs, ev)
		return
	}
	v.change(msgs, m, ev)
}

func (v *View) messagesOf(conv int64) map[int64]*MessageView {
	msgs := v.convs[conv]
	if msgs == nil {
		msgs = map[int64]*MessageView{}
		v.convs[conv] = msgs
	}
	return msgs
}

func newMessageView(ev Event) *MessageView {
	m := &MessageView{ConversationID: ev.ConversationID, Seq: ev.Seq, SenderID: ev.SenderID, ClientMsgID: ev.ClientMsgID,
		Body: ev.Body, CreatedAt: ev.CreatedAt, EditedAt: ev.EditedAt, Recalled: ev.Recalled, ReplyTo: ev.ReplyTo,
		ForwardedFrom: ev.ForwardedFrom}
	if m.Recalled {
		m.recall()
	}
	return m
}

// recall leaves m as chatd shows a recalled message (chat.Message's
// AsRecalled): that it was sent, by whom and when; nothing of what it
// said (body, reactions, edits) or where it came from (its quote, its
// forward header).
func (m *MessageView) recall() {
	*m = MessageView{ConversationID: m.ConversationID, Seq: m.Seq, SenderID: m.SenderID, ClientMsgID: m.ClientMsgID,
		CreatedAt: m.CreatedAt, Recalled: true}
}

// change applies an edit, a recall or a reaction to message m.
func (v *View) change(msgs map[int64]*MessageView, m *MessageView, ev Event) {
	if m.Recalled {
		return // taken back: nothing of it to change
	}
	switch ev.Type {
	case EventMessageEdited:
		if ev.BodyHidden {
			// Its text is not the viewer's to read (they hold the
			// message from an earlier membership): it stays as they
			// read it, not cleared.
			return
		}
		at := ev.EditedAt
		if at == nil {
			at = &ev.CreatedAt
		}
		m.Body, m.EditedAt = ev.Body, at
	case EventMessageRecalled:
		m.recall()
	case EventReactionUpdated:
		v.react(m, ev)
	}
	v.followReplies(msgs, m)
}

// react sets the emoji's count to what the event says it is after the
// change, and the viewer's own mark when the change was theirs.
func (v *View) react(m *MessageView, ev Event) {
	i := slices.IndexFunc(m.Reactions, func(r Reaction) bool { return r.Emoji == ev.Emoji })
	if i < 0 {
		m.Reactions = append(m.Reactions, Reaction{Emoji: ev.Emoji})
		i = len(m.Reactions) - 1
	}
	m.Reactions[i].Count = ev.Count
	if ev.UserID == v.me {
		m.Reactions[i].Me = ev.On
	}
	if m.Reactions[i].Count <= 0 {
		m.Reactions = slices.Delete(m.Reactions, i, i+1)
	}
}

// followReplies keeps the quotes of replies to m as m is now.
func (v *View) followReplies(msgs map[int64]*MessageView, m *MessageView) {
	for _, r := range msgs {
		if r.ReplyTo != nil && r.ReplyTo.Seq == m.Seq {
			ref := *r.ReplyTo
			if m.Recalled {
				ref = recalledQuote(ref)
			} else {
				ref.Snippet = snippet(m.Body)
			}
			r.ReplyTo = &ref
		}
	}
}

// followAbsent keeps the quotes of replies to a message the view does not
// hold as that message is now: recalled (no text) after its recall, the
// new text after its edit, none after one that cleared it. An edit whose
// body chatd hides from the viewer (BodyHidden: a message from before
// their join) tells nothing of the text and leaves the quote as it is.
func (v *View) followAbsent(msgs map[int64]*MessageView, ev Event) {
	if ev.Type != EventMessageRecalled && (ev.Type != EventMessageEdited || ev.BodyHidden) {
		return
	}
	for _, r := range msgs {
		if r.ReplyTo == nil || r.ReplyTo.Seq != ev.TargetSeq || r.ReplyTo.Recalled {
			continue
		}
		ref := *r.ReplyTo
		if ev.Type == EventMessageRecalled {
			ref = recalledQuote(ref)
		} else {
			ref.Snippet = snippet(ev.Body)
		}
		r.ReplyTo = &ref
	}
}

// recalledQuote is quote q once its message is recalled, as chatd reads
// it: recalled, with neither snippet nor type (an edit changes neither
// the quoted message's type nor, so, the quote's).
func recalledQuote(q ReplyRef) ReplyRef {
	return ReplyRef{Seq: q.Seq, SenderID: q.SenderID, Recalled: true}
}

// snippet is the first 100 characters of body, as chatd cuts it.
func snippet(body string) string {
	n := 0
	for i := range body {
		if n == 100 {
			return body[:i]
		}
		n++
	}
	return body
}

// ApplyHistory applies entries read from history, ascending by seq: a
// page forward from the view's position, or an older page (scrolling
// back), whose messages the view does not hold yet are added as history
// shows them now, with the changes that arrived for them meanwhile; the
// other entries of an older page are in those messages' state already.
func (v *View) ApplyHistory(ms []Message) {
	for _, m := range ms {
		if m.Seq <= v.Position(m.ConversationID) {
			if m.Kind == KindMessage || m.Kind == "" {
				v.addOlder(m)
			}
			continue
		}
		ev := messageEvent(m)
		if m.Kind == KindMessage || m.Kind == "" {
			ev.FromHistory = true
			v.Apply(ev)
			v.setReactions(m)
			continue
		}
		v.Apply(ev)
	}
}

// addOlder adds a message below the view's position that it does not
// hold, then the changes to it that arrived before it.
func (v *View) addOlder(m Message) {
	v.mu.Lock()
	defer v.mu.Unlock()
	msgs := v.messagesOf(m.ConversationID)
	if msgs[m.Seq] != nil {
		return
	}
	mv := newMessageView(messageEvent(m))
	if !mv.Recalled {
		mv.Reactions = slices.Clone(m.Reactions)
	}
	msgs[m.Seq] = mv
	orphans := v.orphans[m.ConversationID]
	for _, ev := range orphans {
		if ev.TargetSeq == m.Seq {
			v.change(msgs, mv, ev)
		}
	}
	v.orphans[m.ConversationID] = slices.DeleteFunc(orphans, func(ev Event) bool { return ev.TargetSeq == m.Seq })
	v.followReplies(msgs, mv)
}

// setReactions takes a message's reactions as history reports them now.
func (v *View) setReactions(m Message) {
	v.mu.Lock()
	defer v.mu.Unlock()
	if mv := v.convs[m.ConversationID][m.Seq]; mv != nil && !mv.Recalled {
		mv.Reactions = slices.Clone(m.Reactions)
	}
}

// Messages returns a conversation's messages, ascending by seq.
func (v *View) Messages(conversationID int64) []MessageView {
	v.mu.Lock()
	defer v.mu.Unlock()
	var out []MessageView
	for _, m := range v.convs[conversationID] {
		c := *m
		c.Reactions = slices.Clone(m.Reactions)
		out = append(out, c)
	}
	slices.SortFunc(out, func(a, b MessageView) int { return int(a.Seq - b.Seq) })
	return out
}

// Position is the highest seq the view applied for a conversation.
func (v *View) Position(conversationID int64) int64 {
	v.mu.Lock()
	defer v.mu.Unlock()
	return v.have[conversationID]
}

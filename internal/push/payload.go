package push

import (
	"encoding/json"
	"strconv"
	"time"
	"unicode"
	"unicode/utf8"
)

// MaxPayloadBytes bounds a notification's JSON: within APNs' and FCM's
// 4 KB, and within one 4096-byte Web Push record after RFC 8291's header,
// padding delimiter and tag.
const MaxPayloadBytes = 3072

// previewBytes bounds a preview's text before fit.
const previewBytes = 1024

// Notification is what a device is woken with: the Web Push payload, and
// the "notification" of a chat.push request.
//
// Type "message": Seq is the newest of Count messages, Body its text only
// with push_preview; apps fetch messages over MQTT or HTTP after waking
// (seq catch-up), the push is only a wake-up.
//
// Type "remove": silent; the conversation's notification showed messages
// that were recalled (Seqs, oldest first; Seq the newest recalled), or,
// for a former member, the message Seq that was edited: take them out of
// it. Only userId, conversationId, seq, seqs and badge
// are set.
//
// Type "update" (push_preview only): silent; message Seq, whose text the
// conversation's notification shows, was edited: Body is its text now,
// to show in its place. Only userId, conversationId, seq, editSeq, body
// and badge are set.
//
// EditSeq is the seq of the edit whose text Body is (its message.edited
// seq; absent: the text as sent), on an update and on a notification with
// a preview. A push service keeps no order between pushes without a
// Topic or collapse key: a device shows an update's text only when it is
// of a newer edit than the text it shows.
type Notification struct {
	Type string `json:"type"` // "message", "remove" or "update"
	// UserID is the user the push is for: a device (a browser) used by
	// several users in turn shows and follows it only for that one.
	UserID         int64   `json:"userId"`
	ConversationID int64   `json:"conversationId"`
	Seq            int64   `json:"seq"`
	Seqs           []int64 `json:"seqs,omitempty"` // a remove's recalled messages
	SenderID       int64   `json:"senderId,omitempty"`
	Count          int     `json:"count,omitempty"`
	Badge          int64   `json:"badge"`
	Title          string  `json:"title,omitempty"`
	Body           string  `json:"body,omitempty"`
	EditSeq        int64   `json:"editSeq,omitempty"`
}

// Notification types.
const (
	TypeMessage = "message"
	TypeRemove  = "remove"
	TypeUpdate  = "update"
)

// Request is one FCM or APNs push handed to the operator's sender: the
// value of a chat.push Kafka record and the body of a webhook POST
// (docs/events.md).
type Request struct {
	// ID is the same for every attempt of one push to one device: the
	// receiver de-duplicates by it.
	ID     string    `json:"id"`
	UserID int64     `json:"userId"`
	Device DeviceRef `json:"device"`
	// Tag names the conversation's notification on the device (Android's
	// tag, APNs thread-id): a newer one replaces it, a remove or an update
	// finds it by it.
	Tag string `json:"tag"`
	// CollapseKey (apns-collapse-id, FCM collapse_key) lets a newer push
	// replace an undelivered older one of the conversation: the
	// notification's tag, for a notification and a remove; none for an
	// update (pushKey).
	CollapseKey  string       `json:"collapseKey,omitempty"`
	Notification Notification `json:"notification"`
	CreatedAt    time.Time    `json:"createdAt"`
}

// DeviceRef names the target of a Request.
type DeviceRef struct {
	ID       int64  `json:"id"`
	Platform string `json:"platform"`
	Token    string `json:"token"`
	AppID    string `json:"appId"`
	Locale   string `json:"locale"`
}

// notification builds j's payload.
func (p *Pusher) notification(j *job) Notification {
	if j.remove {
		return Notification{Type: TypeRemove, UserID: j.user, ConversationID: j.conv, Seq: j.seq, Seqs: j.recalled, Badge: j.badge}.fit()
	}
	if j.update {
		return Notification{Type: TypeUpdate, UserID: j.user, ConversationID: j.conv, Seq: j.seq, Body: truncate(j.body, previewBytes), EditSeq: j.editSeq, Badge: j.badge}.fit()
	}
	// j.count leaves out what the user acknowledged meanwhile
	// (readJobSQL); a push that goes has at least its newest message.
	n := Notification{Type: TypeMessage, UserID: j.user, ConversationID: j.conv, Seq: j.seq, SenderID: j.sender, Count: max(j.count, 1), Badge: j.badge}
	switch {
	case j.convType == "GROUP" && j.title != "":
		n.Title = j.title
	case n.Count == 1:
		n.Title = "New message"
	default:
		n.Title = strconv.Itoa(n.Count) + " new messages"
	}
	n.Title = truncate(n.Title, 200)
	if p.cfg.Preview {
		n.Body, n.EditSeq = truncate(j.body, previewBytes), j.editSeq
	}
	return n.fit()
}

// encode writes n as JSON within MaxPayloadBytes (n.fit()).
func (n Notification) encode() []byte {
	b, _ := json.Marshal(n.fit())
	return b
}

// fit returns n shortened so that its JSON is within MaxPayloadBytes: the
// body (and then the title) is cut when escaping made it longer, a
// remove's seqs keep the newest (a device then takes out only those). Every
// output sends the fitted notification: the Web Push payload, and the one
// in an FCM/APNs Request.
func (n Notification) fit() Notification {
	for {
		b, err := json.Marshal(n)
		if err == nil && len(b) <= MaxPayloadBytes {
			return n
		}
		switch {
		case len(n.Seqs) > 1:
			n.Seqs = n.Seqs[len(n.Seqs)/2:]
		case len(n.Body) > 16:
			n.Body = truncate(n.Body, len(n.Body)/2)
		case n.Body != "":
			n.Body = ""
		case len(n.Title) > 16:
			n.Title = truncate(n.Title, len(n.Title)/2)
		default:
			n.Title = ""
		}
	}
}

// truncate cuts s to at most n bytes between two characters as a phone
// draws them (graphemeCut), marking the cut.
func truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	const ell = "…"
	return s[:graphemeCut(s, max(n-len(ell), 0))] + ell
}

// graphemeCut returns the largest i <= n that does not split a user
// -perceived character of s (UAX #29, for what previews hold): not inside a
// rune, not before a mark, variation selector, skin tone, tag or joiner
// that extends the character before it, not after a ZWJ or an Indic
// virama that joins the next one to it, and not between the two regional
// indicators of a flag.
func graphemeCut(s string, n int) int {
	cut := n
	for cut > 0 {
		for cut > 0 && !utf8.RuneStart(s[cut]) {
			cut--
		}
		if cut == 0 {
			return 0
		}
		next, _ := utf8.DecodeRuneInString(s[cut:])
		prev, size := utf8.DecodeLastRuneInString(s[:cut])
		switch {
		case extends(next), joins(prev):
			cut -= size
		case isRegional(next) && isRegional(prev) && regionalRun(s[:cut])%2 == 1:
			cut -= size
		default:
			return cut
		}
	}
	return 0
}

// extends: r belongs to the character before it.
func extends(r rune) bool {
	return unicode.In(r, unicode.Mn, unicode.Me, unicode.Mc) ||
		r == '\u200d' || // ZWJ
		(r >= 0xfe00 && r <= 0xfe0f) || (r >= 0xe0100 && r <= 0xe01ef) || // variation selectors
		(r >= 0x1f3fb && r <= 0x1f3ff) || // skin tones
		(r >= 0xe0020 && r <= 0xe007f) // tags (subdivision flags)
}

// joins: r joins the character after it to the one before it (a ZWJ
// emoji sequence, an Indic conjunct).
func joins(r rune) bool {
	switch r {
	case '\u200d', '\u094d', '\u09cd', '\u0acd', '\u0b4d', '\u0c4d', '\u0d4d':
		return true
	}
	return false
}

func isRegional(r rune) bool { return r >= 0x1f1e6 && r <= 0x1f1ff }

// regionalRun counts the regional indicators s ends with.
func regionalRun(s string) int {
	k := 0
	for {
		r, size := utf8.DecodeLastRuneInString(s)
		if size == 0 || !isRegional(r) {
			return k
		}
		k++
		s = s[:len(s)-size]
	}
}

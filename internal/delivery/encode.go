package delivery

import chat "github.com/chatd/chatd"

// encodeMessage renders the event of an entry read back from PostgreSQL
// (a message as it is now, or an edit, recall or reaction), slim for large
// groups like the live path.
func encodeMessage(m chat.Message, large bool) ([]byte, error) {
	ev := chat.EntryEvent(m.UTC())
	if large {
		ev = ev.Slim()
	}
	return chat.EncodeEvent(ev)
}

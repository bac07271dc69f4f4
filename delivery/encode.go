package delivery

import chat "github.com/chatd/chatd"

// encodeMessage renders message.new for a message read back from
// PostgreSQL, slim for large groups like the live path.
func encodeMessage(m chat.Message, large bool) ([]byte, error) {
	ev := chat.MessageEvent(m)
	if large {
		ev = ev.Slim()
	}
	return chat.EncodeEvent(ev)
}

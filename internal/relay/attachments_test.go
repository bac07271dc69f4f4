package relay_test

import (
	"context"
	"testing"
	"time"

	"github.com/google/uuid"

	chat "github.com/chatd/chatd"
	"github.com/chatd/chatd/store"
)

// TestKafkaCarriesAMessagesAttachmentsAsItsLiveEvent sends a message with
// an attachment and checks that the message.new on Kafka (encoded by the
// relay from the entry as stored) is byte for byte the event the send
// published live: attachment metadata has one definition.
func TestKafkaCarriesAMessagesAttachmentsAsItsLiveEvent(t *testing.T) {
	pool, st, conv := storeGroup(t)
	ctx := context.Background()
	as := store.NewAttachments(pool)
	id, key := chat.NewUploadID(), chat.NewBlobKey()
	if err := as.CreateUpload(ctx, chat.UploadRecord{ID: id, BlobKey: key, UploaderID: 1, ConversationID: conv.ID,
		Name: "cat.jpg", DeclaredType: "image/jpeg", DeclaredSize: 1234, URLExpiresAt: time.Now().Add(time.Hour)}, 0); err != nil {
		t.Fatal(err)
	}
	if ok, err := as.CompleteUpload(ctx, id, chat.UploadMeta{ContentType: "image/jpeg", Size: 1234, SHA256: "ab12", Width: 640, Height: 480, Thumbnail: true}); !ok || err != nil {
		t.Fatalf("complete: %v %v", ok, err)
	}
	if live, err := as.SetThumbnail(ctx, id, key, &chat.Thumbnail{ContentType: "image/jpeg", Width: 320, Height: 240, Size: 999}); !live || err != nil {
		t.Fatalf("thumbnail: %v %v", live, err)
	}
	res, err := st.Send(ctx, chat.SendRequest{ConversationID: conv.ID, SenderID: 1, ClientMsgID: uuid.NewString(),
		Attachments: []chat.AttachmentRef{{UploadID: id, Caption: "a cat"}}})
	if err != nil {
		t.Fatal(err)
	}
	m := res.Message
	if m.MsgType != chat.MsgImage || len(m.Attachments) != 1 || m.Attachments[0].Thumbnail == nil {
		t.Fatalf("sent: %+v", m)
	}
	checkRelayedAsLive(t, relayEntries(t, pool), 2, m)
}

package store_test

import (
	"testing"
	"time"

	chat "github.com/chatd/chatd"
	"github.com/chatd/chatd/internal/pgtest"
)

// A forward of a photo and the photo's recall race: the forward is parked
// in its transaction after writing its entry (a trigger waits on an
// advisory lock the test holds), the recall runs meanwhile, then the
// forward goes on. Either the forward is refused, or it is a whole copy
// of the message as it was: its type with its files, never the type of a
// photo with no file (or the recalled body without the recall seen).
func TestAForwardRacingTheRecallOfItsSourceCopiesItWholeOrIsRefused(t *testing.T) {
	t.Parallel()
	ctx := testCtx(t)
	st, pool := newStore(t)
	src, dst := mustGroup(t, st, 1, 2), mustGroup(t, st, 1, 3)
	id, _ := imageUpload(t, pool, 1, src.ID)
	photo := mustSendFiles(t, st, src.ID, 1, "caption", []chat.AttachmentRef{{UploadID: id}})
	mustExec(t, ctx, pool, `
		CREATE FUNCTION test_hold_forward() RETURNS trigger LANGUAGE plpgsql AS $$
			BEGIN PERFORM pg_advisory_xact_lock_shared(4343); RETURN NEW; END $$;
		CREATE TRIGGER test_hold_forward AFTER INSERT ON message FOR EACH ROW
			WHEN (NEW.forwarded_seq IS NOT NULL) EXECUTE FUNCTION test_hold_forward();`)
	hold, err := pool.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = hold.Rollback(ctx) }()
	if _, err := hold.Exec(ctx, `SELECT pg_advisory_xact_lock(4343)`); err != nil {
		t.Fatal(err)
	}

	type answer struct {
		res chat.ChangeResult
		err error
	}
	fwd, rc := make(chan answer, 1), make(chan answer, 1)
	go func() {
		res, err := st.Send(ctx, forwardReq(dst.ID, 1, src.ID, photo.Seq))
		fwd <- answer{chat.ChangeResult{Entry: res.Message}, err}
	}()
	waitFor(t, "the forward waits in its transaction", func() bool { return pgtest.LockWaiters(t, pool) >= 1 })
	go func() {
		res, err := st.Change(ctx, change(chat.KindRecall, src.ID, 1, photo.Seq))
		rc <- answer{res, err}
	}()
	// The recall either commits or waits for the forward's transaction.
	var recall *answer
	deadline := time.Now().Add(10 * time.Second)
	for recall == nil && pgtest.LockWaiters(t, pool) < 2 {
		select {
		case a := <-rc:
			recall = &a
		case <-time.After(5 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			t.Fatal("the recall neither committed nor waited")
		}
	}
	if err := hold.Rollback(ctx); err != nil {
		t.Fatal(err)
	}
	f := <-fwd
	if recall == nil {
		a := <-rc
		recall = &a
	}
	if recall.err != nil {
		t.Fatalf("recall: %v", recall.err)
	}
	if f.err != nil {
		wantCode(t, "forward of a message being recalled", f.err, chat.CodeNotFound)
		return
	}
	var msgType *string
	var body string
	if err := pool.QueryRow(ctx, `SELECT msg_type, body FROM message WHERE conversation_id = $1 AND seq = $2`,
		dst.ID, f.res.Entry.Seq).Scan(&msgType, &body); err != nil {
		t.Fatal(err)
	}
	files := queryInt(t, pool, `SELECT count(*) FROM attachment WHERE conversation_id = $1 AND seq = $2`, dst.ID, f.res.Entry.Seq)
	if msgType == nil || *msgType != "image" || files != 1 || body != "caption" {
		t.Fatalf("the forward committed as type %v, body %q, with %d files; want an image, %q, with its 1 file",
			deref(msgType), body, files, "caption")
	}
}

func deref(s *string) string {
	if s == nil {
		return "<nil>"
	}
	return *s
}

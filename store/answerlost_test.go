package store_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"runtime/pprof"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	chat "github.com/chatd/chatd"
	"github.com/chatd/chatd/internal/pgtest"
	"github.com/chatd/chatd/internal/testkit"
	"github.com/chatd/chatd/store"
)

// TestASendWhoseCommitLostItsAnswerIsPublishedAndAnsweredWithItsSeq: the
// batch of alice's message committed, and the answer to its COMMIT was
// lost with the connection. The store asks PostgreSQL what became of it
// (the batch run again on another connection answers its change a
// duplicate, with the seq first assigned): alice is answered with that
// seq, the message is published to the members' sessions (the fan-out
// after commit), and its outbox row is there for the relay. A resend
// with the same clientMsgId is a duplicate with the same seq. Before, the
// batch failed as unavailable and nothing was published: members online
// on the node missed the message until a later one of the conversation
// made their session read back the gap, or until they reconnected.
func TestASendWhoseCommitLostItsAnswerIsPublishedAndAnsweredWithItsSeq(t *testing.T) {
	t.Parallel()
	ctx, pool, proxy := answerLosingPool(t)
	rec := &publishRecorder{types: []string{chat.EventMessageNew}}
	st := store.New(pool, chat.DefaultLimits(), store.WithPublisher(rec), store.WithSendPool(proxy.Pool))
	t.Cleanup(func() { _ = st.Close(context.Background()) })
	conv := mustGroup(t, st, 1, 2)
	first := mustSend(t, st, conv.ID, 1, "before")

	cut := proxy.LoseAnswer("chat_send_batch", nil)
	req := sendReq(conv.ID, 1, "its answer is lost")
	res, err := st.Send(ctx, req)
	select {
	case <-cut:
	case <-time.After(5 * time.Second):
		t.Fatal("the answer to the batch's COMMIT was not lost")
	}
	want := first.Seq + 1
	if got := queryInt(t, pool, `SELECT count(*) FROM message WHERE conversation_id = $1 AND seq = $2 AND client_msg_id = $3`,
		conv.ID, want, req.ClientMsgID); got != 1 {
		t.Fatalf("the message is not committed at seq %d (%d rows)", want, got)
	}
	if err != nil || res.Message.Seq != want {
		t.Errorf("send whose COMMIT answer was lost = seq %d, %v; want seq %d, no error (it committed)", res.Message.Seq, err, want)
	}
	published := func() int {
		n := 0
		for _, ev := range rec.events() {
			if ev.ConversationID == conv.ID && ev.Seq == want {
				n++
			}
		}
		return n
	}
	testkit.WaitFor(t, 5*time.Second, "the committed message published to the members' sessions", func() bool { return published() > 0 })
	if evs := outboxEvents(t, pool, conv.ID, chat.EventMessageNew); len(evs) != 2 || evs[1].Seq != want {
		t.Errorf("outbox rows for the relay: %+v, want seqs %d and %d", evs, first.Seq, want)
	}

	again, err := st.Send(ctx, req)
	if err != nil || !again.Duplicate || again.Message.Seq != want {
		t.Errorf("resend = seq %d, duplicate %v, %v; want the duplicate of seq %d", again.Message.Seq, again.Duplicate, err, want)
	}
	if got := queryInt(t, pool, `SELECT count(*) FROM message WHERE conversation_id = $1`, conv.ID); got != want {
		t.Errorf("%d entries in the group, want %d (each message once)", got, want)
	}
}

// TestAReadReceiptWhoseCommitLostItsAnswerIsAnsweredAndPublished: bob's
// read watermark moved, and the answer to the batch's COMMIT was lost
// with the connection. The store asks PostgreSQL what became of it
// (pg_xact_status): bob is answered the watermark it committed, and the
// read.updated is published to the members' sessions (alice's "seen").
// His repeat answers the same watermark, which never moves back. Before,
// the receipt failed as unavailable and the read.updated was never
// published on the node: the repeat finds the watermark there already,
// and moves nothing.
func TestAReadReceiptWhoseCommitLostItsAnswerIsAnsweredAndPublished(t *testing.T) {
	t.Parallel()
	ctx, pool, proxy := answerLosingPool(t)
	rec := &publishRecorder{types: []string{chat.EventReadUpdated}}
	st := store.New(proxy.Pool, chat.DefaultLimits(), store.WithPublisher(rec))
	t.Cleanup(func() { _ = st.Close(context.Background()) })
	r := newReceipts(t, st, store.ReceiptsConfig{DeliveredInterval: 10 * time.Millisecond})
	conv := mustGroup(t, st, 1, 2)
	sendN(t, st, conv.ID, 1, 3, "hi bob")

	cut := proxy.LoseAnswer("UPDATE conversation_member m\nSET last_read_seq", nil)
	res, err := r.MarkRead(ctx, conv.ID, 2, 2)
	select {
	case <-cut:
	case <-time.After(5 * time.Second):
		t.Fatal("the answer to the read batch's COMMIT was not lost")
	}
	if got := queryInt(t, pool, `SELECT last_read_seq FROM conversation_member WHERE conversation_id = $1 AND user_id = 2`, conv.ID); got != 2 {
		t.Fatalf("bob's read watermark is %d, want 2 (committed)", got)
	}
	if err != nil || res.LastReadSeq != 2 {
		t.Errorf("read receipt whose COMMIT answer was lost = %+v, %v; want lastReadSeq 2, no error (it committed)", res, err)
	}
	testkit.WaitFor(t, 5*time.Second, "bob's read.updated published", func() bool {
		for _, ev := range rec.events() {
			if ev.ConversationID == conv.ID && ev.UserID == 2 && ev.Seq == 2 {
				return true
			}
		}
		return false
	})
	again, err := r.MarkRead(ctx, conv.ID, 2, 1)
	if err != nil || again.LastReadSeq != 2 {
		t.Errorf("an older receipt after it = %+v, %v; want lastReadSeq 2 (never backwards)", again, err)
	}
}

// TestADeliveredFlushWhoseCommitLostItsAnswerIsWrittenAgainAndNeverMovesBack:
// the delivered flush of bob's acknowledgement committed, and the answer
// to its COMMIT was lost with the connection. The writer keeps the batch
// and writes it again at its next tick (nothing moves: it is there), an
// older acknowledgement after it moves nothing back, and a newer one is
// written as ever. A guard: it passed before too.
func TestADeliveredFlushWhoseCommitLostItsAnswerIsWrittenAgainAndNeverMovesBack(t *testing.T) {
	t.Parallel()
	pool := pgtest.NewPool(t)
	proxy := pgtest.NewAnswerLosing(t, pool)
	st := store.New(proxy.Pool, chat.DefaultLimits())
	t.Cleanup(func() { _ = st.Close(context.Background()) })
	r, conv := deliveredFlushLosingItsCommitAnswer(t, st, pool, proxy)
	waitFor(t, "the lost flush written again", func() bool { return r.DeliveredFlushes() > 0 })
	before := r.DeliveredFlushes()
	r.Delivered(conv.ID, 2, 2)
	waitFor(t, "the older ack's flush", func() bool { return r.DeliveredFlushes() > before })
	if n := deliveredRow(t, pool, conv.ID, 2); n != 3 {
		t.Errorf("member_delivery %d after an older ack, want 3", n)
	}
	r.Delivered(conv.ID, 2, 4)
	waitFor(t, "the newer ack's flush", func() bool { return deliveredRow(t, pool, conv.ID, 2) == 4 })
}

// TestADeliveredFlushWhoseCommitLostItsAnswerIsPublishedOnTheNode: the
// delivered flush of bob's acknowledgement committed, and the answer to
// its COMMIT was lost with the connection. Its delivery.updated for alice
// (bob got her messages up to seq 3) is published to this node's sessions
// all the same: the writer finds, as it writes the batch again, that the
// watermark it wrote is there. Before, the write again moved nothing and
// published nothing: the event reached other nodes through Kafka (its
// outbox row committed), but alice's sessions on this node, which skips
// its own outbox rows, never got it.
func TestADeliveredFlushWhoseCommitLostItsAnswerIsPublishedOnTheNode(t *testing.T) {
	t.Parallel()
	_, pool, proxy := answerLosingPool(t)
	rec := &publishRecorder{types: []string{chat.EventDeliveryUpdated}}
	st := store.New(proxy.Pool, chat.DefaultLimits(), store.WithPublisher(rec))
	t.Cleanup(func() { _ = st.Close(context.Background()) })
	_, conv := deliveredFlushLosingItsCommitAnswer(t, st, pool, proxy)
	if evs := outboxEvents(t, pool, conv.ID, chat.EventDeliveryUpdated); len(evs) != 1 || evs[0].Seq != 3 {
		t.Fatalf("outbox delivery.updated rows %+v, want one at seq 3 (committed)", evs)
	}
	testkit.WaitFor(t, 5*time.Second, "alice's delivery.updated (bob has seq 3) published on the node", func() bool {
		for _, ev := range rec.events() {
			if ev.ConversationID == conv.ID && ev.UserID == 2 && ev.SenderID == 1 && ev.Seq == 3 {
				return true
			}
		}
		return false
	})
	if n := len(rec.events()); n != 1 {
		t.Errorf("%d delivery.updated published, want 1: %+v", n, rec.events())
	}
}

// TestAReadReceiptWhoseCommitIsInDoubtDoesNotHoldUpOtherReceipts: the
// connection of bob's read batch died with its COMMIT unsent, and
// PostgreSQL has not noticed: his transaction is in progress, and the
// writer asks what became of it for up to 5 s. Carol's receipt in
// another conversation meanwhile is answered at once, not after that
// wait (the node's read receipts have one writer). Bob's receipt is
// answered unavailable: its outcome is not known.
func TestAReadReceiptWhoseCommitIsInDoubtDoesNotHoldUpOtherReceipts(t *testing.T) {
	t.Parallel()
	ctx, _, proxy := answerLosingPool(t)
	st := store.New(proxy.Pool, chat.DefaultLimits())
	t.Cleanup(func() { _ = st.Close(context.Background()) })
	r := newReceipts(t, st, store.ReceiptsConfig{DeliveredInterval: 10 * time.Millisecond})
	bobs, carols := bobsAndCarolsGroups(t, st)

	bob := markReadOrphaned(ctx, t, r, proxy, bobs.ID, 2, 2, 5*time.Second)
	start := time.Now()
	res, err := r.MarkRead(ctx, carols.ID, 3, 3)
	if took := time.Since(start); err != nil || res.LastReadSeq != 3 || took > time.Second {
		t.Errorf("carol's receipt while bob's batch is in doubt = %+v, %v after %v; want lastReadSeq 3 within 1s", res, err, took.Round(time.Millisecond))
	}
	select {
	case err := <-bob:
		if !errors.Is(err, chat.ErrUnavailable) {
			t.Errorf("bob's receipt whose commit is in doubt = %v, want unavailable", err)
		}
	case <-time.After(15 * time.Second):
		t.Fatal("bob's receipt was not answered")
	}
}

// deliveredFlushLosingItsCommitAnswer: in a new group of alice (1) and
// bob (2) with five messages of alice's, bob acknowledges seq 3 to a
// receipts writer of st flushing every 10 ms; the flush commits and the
// answer to its COMMIT is lost (within 5 s), and member_delivery (read
// through pool, around proxy) holds 3.
func deliveredFlushLosingItsCommitAnswer(t *testing.T, st *store.Store, pool *pgxpool.Pool, proxy *pgtest.AnswerLosing) (*store.Receipts, chat.Conversation) {
	t.Helper()
	r := newReceipts(t, st, store.ReceiptsConfig{DeliveredInterval: 10 * time.Millisecond})
	conv := mustGroup(t, st, 1, 2)
	sendN(t, st, conv.ID, 1, 5, "hi bob")

	cut := proxy.LoseAnswer("INSERT INTO member_delivery AS d", nil)
	r.Delivered(conv.ID, 2, 3)
	select {
	case <-cut:
	case <-time.After(5 * time.Second):
		t.Fatal("the answer to the delivered flush's COMMIT was not lost")
	}
	if n := deliveredRow(t, pool, conv.ID, 2); n != 3 {
		t.Fatalf("member_delivery %d, want 3 (committed)", n)
	}
	return r, conv
}

// bobsAndCarolsGroups makes two groups of alice (1), one with bob (2),
// one with carol (3), with three messages of alice's in each.
func bobsAndCarolsGroups(t *testing.T, st *store.Store) (bobs, carols chat.Conversation) {
	t.Helper()
	bobs = mustGroup(t, st, 1, 2)
	carols = mustGroup(t, st, 1, 3)
	sendN(t, st, bobs.ID, 1, 3, "hi bob")
	sendN(t, st, carols.ID, 1, 3, "hi carol")
	return bobs, carols
}

// markReadOrphaned has user mark conv read up to seq through r, the
// read batch's COMMIT held back by proxy (its connection closed, its
// transaction left in progress, orphaned). It returns once the COMMIT
// was held (within the given time), with the channel the receipt's
// answer comes on.
func markReadOrphaned(ctx context.Context, t *testing.T, r *store.Receipts, proxy *pgtest.AnswerLosing, conv, user, seq int64, within time.Duration) <-chan error {
	t.Helper()
	cut := proxy.Orphan("UPDATE conversation_member m\nSET last_read_seq")
	answer := make(chan error, 1)
	go func() {
		_, err := r.MarkRead(ctx, conv, user, seq)
		answer <- err
	}()
	select {
	case <-cut:
	case <-time.After(within):
		t.Fatalf("the read batch of conversation %d was not held back", conv)
	}
	return answer
}

// answerLosingPool is a database that keeps outbox rows (as with a relay)
// and an AnswerLosing proxy in front of it.
func answerLosingPool(t *testing.T) (context.Context, *pgxpool.Pool, *pgtest.AnswerLosing) {
	t.Helper()
	ctx := testCtx(t)
	pool := pgtest.NewPool(t)
	if err := store.WantOutboxRows(ctx, pool); err != nil {
		t.Fatal(err)
	}
	return ctx, pool, pgtest.NewAnswerLosing(t, pool)
}

// settleRecorder records, in one order, what a store publishes and the
// conversations it calls unsettled and settled (chat.UnsettledPublisher).
type settleRecorder struct {
	mu  sync.Mutex
	log []string
}

func (r *settleRecorder) add(s string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.log = append(r.log, s)
}

func (r *settleRecorder) Publish(evs ...chat.Event) {
	for _, ev := range evs {
		r.add(fmt.Sprintf("%s %d", ev.Type, ev.ConversationID))
	}
}

func (r *settleRecorder) Unsettled(ids ...int64) {
	for _, id := range ids {
		r.add(fmt.Sprintf("unsettled %d", id))
	}
}

func (r *settleRecorder) Settled(ids ...int64) {
	for _, id := range ids {
		r.add(fmt.Sprintf("settled %d", id))
	}
}

func (r *settleRecorder) entries() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return slices.Clone(r.log)
}

// TestARemovalWhoseOutcomeWasNotLearntIsPublishedOnceLearnt: the removal
// of bob committed, the answer to its COMMIT was lost, and PostgreSQL
// does not answer the question of what became of it: the removal fails
// as unavailable, and the publisher hears at once that the group is
// unsettled, nothing else. Once PostgreSQL answers again, the store
// learns that it committed, publishes its member.removed and system.new,
// then settles the group. Before, nothing was ever published: the node's
// sessions never heard of the removal.
func TestARemovalWhoseOutcomeWasNotLearntIsPublishedOnceLearnt(t *testing.T) {
	t.Parallel()
	ctx, pool, proxy := answerLosingPool(t)
	rec := &settleRecorder{}
	st := store.New(proxy.Pool, chat.DefaultLimits(), store.WithPublisher(rec))
	t.Cleanup(func() { _ = st.Close(context.Background()) })
	conv := mustGroup(t, st, 1, 2, 3)
	before := len(rec.entries())

	var reachable func()
	removeBobLosingTheCommitAnswer(t, ctx, st, proxy, conv.ID, func() { reachable = proxy.LoseAnswers("pg_xact_status") })
	if got := queryInt(t, pool, `SELECT count(*) FROM conversation_member WHERE conversation_id = $1 AND user_id = 2`, conv.ID); got != 0 {
		t.Fatalf("bob is still a member: the removal did not commit")
	}
	unsettled := fmt.Sprintf("unsettled %d", conv.ID)
	if got := rec.entries()[before:]; !slices.Equal(got, []string{unsettled}) {
		t.Fatalf("published while the outcome is not known: %q, want only %q", got, unsettled)
	}

	reachable()
	want := []string{unsettled, fmt.Sprintf("member.removed %d", conv.ID), fmt.Sprintf("system.new %d", conv.ID), fmt.Sprintf("settled %d", conv.ID)}
	testkit.WaitFor(t, 10*time.Second, "the removal published once learnt", func() bool { return len(rec.entries()) >= before+len(want) })
	if got := rec.entries()[before:]; !slices.Equal(got, want) {
		t.Errorf("published: %q, want %q", got, want)
	}
}

// removeBobLosingTheCommitAnswer: alice (1) removes bob (2) from conv;
// the removal commits, the answer to its COMMIT is lost (within 5 s),
// lost calls next, and the store cannot learn the outcome: the removal
// fails as unavailable.
func removeBobLosingTheCommitAnswer(t *testing.T, ctx context.Context, st *store.Store, proxy *pgtest.AnswerLosing, conv int64, lost func()) {
	t.Helper()
	cut := proxy.LoseAnswer("DELETE FROM conversation_member WHERE conversation_id", lost)
	err := st.RemoveMember(ctx, conv, 1, 2)
	select {
	case <-cut:
	case <-time.After(5 * time.Second):
		t.Fatal("the answer to the removal's COMMIT was not lost")
	}
	if !errors.Is(err, chat.ErrUnavailable) {
		t.Fatalf("the removal whose outcome was not learnt = %v, want unavailable", err)
	}
}

// goroutinesWith counts the goroutines of the process whose stack (with
// the line that says who created it) holds frame.
func goroutinesWith(frame string) int {
	var b bytes.Buffer
	_ = pprof.Lookup("goroutine").WriteTo(&b, 2)
	return strings.Count(b.String(), frame)
}

// batchers counts the goroutines running a send batcher.
func batchers() int { return goroutinesWith("store.(*batcher).run(") }

// TestCloseStopsGroupCommitWhileAnOutcomeIsBeingAsked: the outcome of a
// removal is not known, and PostgreSQL does not answer the store's next
// question about it when the node shuts down with a short deadline: Close
// still stops group commit (its batcher goroutine ends). Before, Close
// returned at once with "stop learning outcomes" and left the batcher
// running for good. Not parallel: it counts the batchers of the process.
func TestCloseStopsGroupCommitWhileAnOutcomeIsBeingAsked(t *testing.T) {
	ctx, _, proxy := answerLosingPool(t)
	base := batchers()
	st := store.New(proxy.Pool, chat.DefaultLimits(), store.WithPublisher(&settleRecorder{}))
	t.Cleanup(func() { _ = st.Close(context.Background()) })
	conv := mustGroup(t, st, 1, 2, 3)
	mustSend(t, st, conv.ID, 1, "starts group commit")
	if n := batchers(); n != base+1 {
		t.Fatalf("%d batchers running, want %d", n, base+1)
	}

	var hang atomic.Bool
	entered, unblock := make(chan struct{}), make(chan struct{})
	defer close(unblock)
	var once sync.Once
	var lose func()
	lose = func() {
		if hang.Load() {
			once.Do(func() { close(entered) })
			<-unblock
			return
		}
		proxy.LoseAnswer("pg_xact_status", lose)
	}
	removeBobLosingTheCommitAnswer(t, ctx, st, proxy, conv.ID, func() { proxy.LoseAnswer("pg_xact_status", lose) })
	hang.Store(true)
	testkit.Receive(t, entered, 10*time.Second, "the store never asked again about the removal")

	cctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
	defer cancel()
	_ = st.Close(cctx)
	testkit.WaitFor(t, 5*time.Second, "the send batcher to stop after Close", func() bool { return batchers() == base })
}

// TestAReadReceiptWhoseOutcomeWasNotLearntIsPublishedOnceLearnt: bob's
// read batch committed, the answer to its COMMIT was lost, and
// PostgreSQL does not answer the question of what became of it: bob's
// receipt is answered unavailable and nothing is published. Once
// PostgreSQL answers again, the store learns that it committed and
// publishes bob's read.updated to this node's sessions (his other
// devices', the senders'), as a membership change's (writeTx) is. Before,
// the read batch's settling dropped its events: the node's sessions,
// which skip its own outbox rows in Kafka, never heard of the receipt.
func TestAReadReceiptWhoseOutcomeWasNotLearntIsPublishedOnceLearnt(t *testing.T) {
	t.Parallel()
	ctx, pool, proxy := answerLosingPool(t)
	rec := &publishRecorder{types: []string{chat.EventReadUpdated}}
	st := store.New(proxy.Pool, chat.DefaultLimits(), store.WithPublisher(rec))
	t.Cleanup(func() { _ = st.Close(context.Background()) })
	r := newReceipts(t, st, store.ReceiptsConfig{DeliveredInterval: 10 * time.Millisecond})
	conv := mustGroup(t, st, 1, 2)
	sendN(t, st, conv.ID, 1, 3, "hi bob")

	var reachable func()
	cut := proxy.LoseAnswer("UPDATE conversation_member m\nSET last_read_seq", func() { reachable = proxy.LoseAnswers("pg_xact_status") })
	_, err := r.MarkRead(ctx, conv.ID, 2, 2)
	select {
	case <-cut:
	case <-time.After(5 * time.Second):
		t.Fatal("the answer to the read batch's COMMIT was not lost")
	}
	if !errors.Is(err, chat.ErrUnavailable) {
		t.Fatalf("the read receipt whose outcome was not learnt = %v, want unavailable", err)
	}
	if got := queryInt(t, pool, `SELECT last_read_seq FROM conversation_member WHERE conversation_id = $1 AND user_id = 2`, conv.ID); got != 2 {
		t.Fatalf("bob's read watermark is %d, want 2 (committed)", got)
	}
	if evs := rec.events(); len(evs) != 0 {
		t.Fatalf("published while the outcome is not known: %+v", evs)
	}
	reachable()
	testkit.WaitFor(t, 10*time.Second, "bob's read.updated published once learnt", func() bool {
		for _, ev := range rec.events() {
			if ev.ConversationID == conv.ID && ev.UserID == 2 && ev.Seq == 2 {
				return true
			}
		}
		return false
	})
}

// settlingGoroutines counts the goroutines that settle read batches in
// doubt (Receipts.flushReads's).
func settlingGoroutines() int {
	return goroutinesWith("created by github.com/chatd/chatd/store.(*Receipts).flushReads in ")
}

// TestReadBatchesInDoubtAreSettledByAFewGoroutinesAtMost: six read
// batches in a row have their COMMIT held back (their connections died,
// PostgreSQL has not noticed), as when the network to PostgreSQL fails
// for a while. The goroutines that ask what became of them (each up to
// 5 s) are at most store.MaxSettlingReads at once; a batch in doubt
// beyond them is settled on the writer itself, as when there were
// none; every receipt is answered. Before, each batch in doubt started
// one, without bound: a long outage piled up goroutines, each asking
// PostgreSQL every 200 ms on the pool that sends use.
// Not parallel: it counts every goroutine of the process.
func TestReadBatchesInDoubtAreSettledByAFewGoroutinesAtMost(t *testing.T) {
	ctx, _, proxy := answerLosingPool(t)
	st := store.New(proxy.Pool, chat.DefaultLimits())
	t.Cleanup(func() { _ = st.Close(context.Background()) })
	r := newReceipts(t, st, store.ReceiptsConfig{DeliveredInterval: 10 * time.Millisecond})
	const batches = store.MaxSettlingReads + 2
	convs := make([]int64, batches)
	for i := range convs {
		convs[i] = mustGroup(t, st, 1, 2).ID
		sendN(t, st, convs[i], 1, 2, "hi bob")
	}
	var peak atomic.Int64
	stop := make(chan struct{})
	sampled := make(chan struct{})
	go func() {
		defer close(sampled)
		for {
			if n := int64(settlingGoroutines()); n > peak.Load() {
				peak.Store(n)
			}
			select {
			case <-stop:
				return
			case <-time.After(5 * time.Millisecond):
			}
		}
	}()
	var answers []<-chan error
	for _, conv := range convs {
		answers = append(answers, markReadOrphaned(ctx, t, r, proxy, conv, 2, 2, 15*time.Second))
	}
	for _, answer := range answers {
		select {
		case err := <-answer:
			if !errors.Is(err, chat.ErrUnavailable) {
				t.Errorf("a receipt whose batch is in doubt = %v, want unavailable", err)
			}
		case <-time.After(30 * time.Second):
			t.Fatal("a receipt whose batch is in doubt was not answered")
		}
	}
	close(stop)
	<-sampled
	if p := peak.Load(); p > store.MaxSettlingReads {
		t.Errorf("%d goroutines settled read batches at once, want at most %d", p, store.MaxSettlingReads)
	}
}

// TestReceiptsAfterABatchWhoseTransactionIsStillInProgressAreNotHeldUp:
// bob's read batch is in doubt (its connection died with its COMMIT
// unsent, PostgreSQL has not noticed: the transaction is in progress and
// holds bob's member row), and stays so past the 5 s the writer asks:
// bob's receipt is answered unavailable. His next receipt, sent
// meanwhile, waits for his transaction to end (its batch would wait for
// his row), and carol's receipt after it is still answered at once.
// Before, bob's pair was let go when his receipt was answered: his next
// receipt's batch waited for his row on the node's one read writer, and
// carol's receipt behind it until PostgreSQL ended the orphaned
// transaction (idle_in_transaction_session_timeout).
func TestReceiptsAfterABatchWhoseTransactionIsStillInProgressAreNotHeldUp(t *testing.T) {
	t.Parallel()
	ctx, pool, proxy := answerLosingPool(t)
	st := store.New(proxy.Pool, chat.DefaultLimits())
	t.Cleanup(func() { _ = st.Close(context.Background()) })
	r := newReceipts(t, st, store.ReceiptsConfig{DeliveredInterval: 10 * time.Millisecond})
	bobs, carols := bobsAndCarolsGroups(t, st)

	first := markReadOrphaned(ctx, t, r, proxy, bobs.ID, 2, 2, 5*time.Second)
	next := make(chan error, 1)
	go func() {
		_, err := r.MarkRead(ctx, bobs.ID, 2, 3)
		next <- err
	}()
	select {
	case err := <-first:
		if !errors.Is(err, chat.ErrUnavailable) {
			t.Fatalf("bob's receipt whose transaction is in progress = %v, want unavailable", err)
		}
	case <-time.After(15 * time.Second):
		t.Fatal("bob's receipt was not answered")
	}
	start := time.Now()
	res, err := r.MarkRead(ctx, carols.ID, 3, 3)
	// 3 s: room for a loaded machine, below the ~5 s left of the
	// orphan's idle bound that it waited before.
	if took := time.Since(start); err != nil || res.LastReadSeq != 3 || took > 3*time.Second {
		t.Errorf("carol's receipt after bob's was answered = %+v, %v after %v; want lastReadSeq 3 within 3s", res, err, took.Round(time.Millisecond))
	}
	select {
	case err := <-next:
		if err != nil {
			t.Errorf("bob's next receipt = %v, want it written once his transaction ended", err)
		}
	case <-time.After(20 * time.Second):
		t.Fatal("bob's next receipt was not answered")
	}
	if got := queryInt(t, pool, `SELECT last_read_seq FROM conversation_member WHERE conversation_id = $1 AND user_id = 2`, bobs.ID); got != 3 {
		t.Errorf("bob's read watermark is %d, want 3", got)
	}
}

// TestClosingReceiptsWritesTheAcknowledgementsWhileAReadBatchIsInDoubt:
// a node stops while a read batch of bob's is in doubt (its transaction
// orphaned, in progress), with an acknowledgement of carol's waiting for
// the next delivered flush. Close's context runs out before bob's batch
// is settled; carol's acknowledgement is written all the same, within
// it. Before, Close stopped the delivered writer only after the read
// writer was done: it returned at its deadline with the delivered
// writer never told to stop, its last flush never made (the pool closed
// after it, the acknowledgement lost).
func TestClosingReceiptsWritesTheAcknowledgementsWhileAReadBatchIsInDoubt(t *testing.T) {
	t.Parallel()
	ctx, pool, proxy := answerLosingPool(t)
	st := store.New(proxy.Pool, chat.DefaultLimits())
	t.Cleanup(func() { _ = st.Close(context.Background()) })
	r, err := store.NewReceipts(st, store.ReceiptsConfig{DeliveredInterval: time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 40*time.Second)
		defer cancel()
		_ = r.Close(ctx)
	})
	bobs, carols := bobsAndCarolsGroups(t, st)
	r.Delivered(carols.ID, 3, 1)
	waitFor(t, "carol's first acknowledgement written", func() bool {
		var n int64
		err := pool.QueryRow(ctx, `SELECT delivered_seq FROM member_delivery WHERE conversation_id = $1 AND user_id = 3`, carols.ID).Scan(&n)
		return err == nil && n == 1
	})
	r.Delivered(carols.ID, 3, 2) // waits for the next flush: an hour, or Close

	markReadOrphaned(ctx, t, r, proxy, bobs.ID, 2, 2, 5*time.Second)
	cctx, cancel := context.WithTimeout(ctx, 2*time.Second)
	defer cancel()
	_ = r.Close(cctx) // bob's batch is not settled within it
	if n := deliveredRow(t, pool, carols.ID, 3); n != 2 {
		t.Errorf("carol's delivered watermark after Close = %d, want 2 (her waiting acknowledgement written)", n)
	}
}

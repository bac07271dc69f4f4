package push

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/chatd/chatd/internal/pgerr"
	"github.com/chatd/chatd/internal/retry"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
)

// claimSQL claims up to $1 due jobs for $2 seconds (the lease: a node that
// dies holding a claim leaves it to be claimed again when it ends) and
// reads what sending them needs in the same round trip: whether the user
// acknowledged the message meanwhile, the conversation, the newest
// message the job covers that is not recalled and may still wake the
// user (wakesSQL: a block or a mute since the decision counts; its seq,
// sender and text are the notification's; none left: nothing to send),
// how many such covered messages there are that the user has not
// acknowledged or read (a recall the decider has not handled yet is not
// counted nor previewed), the badge (the user's total
// unread) and the devices owed.
//
// A (user, conversation)'s pushes reach its devices in order: none is
// claimed while another of the pair is in flight (leased), and a waiting
// notification is not claimed while a remove or an update of the pair is
// owed (due, or waiting for its retry), which goes first (the
// notification replaces what the remove takes away or the update
// changes; after it, the remove would take the notification away, and
// the update would show an older message's text in it).
// A notification waiting for a retry (claimed before, not leased) is
// never sent again once a newer notification of its pair is waiting: it
// would replace the newer one on the devices. The newer one takes it
// over when claimed: it covers and counts its messages too, and the older
// one is kept as sent (it may be on a device; a recall looks at the
// pair's newest claimed one), and what its claim owed should it reach no
// device (recalled_older) is owed by the newer one's.
// A notification whose claim's lease ran out before its send started is
// handed back by takeBackSQL, in the claim's transaction, before this
// reads: until then (a lock it skipped) neither it nor another job of its
// pair is claimed, so it is never taken for a started one.
// The first claim of a notification records the push of (user,
// conversation) that the minimum interval counts from (applyResults
// forgets it when the claim reaches no device, nor did an earlier claim
// a stopping node cut short: skipped, handed back, refused or owed
// again; a later attempt that reaches one records it again). It also
// narrows the notification's covered to the messages it stands for (the
// count's, readJobSQL), and its seq to the newest of them, the one it
// previews: a recall takes out of the devices' notification only what it
// counted, an edit of the message it shows is followed by an update. A
// later claim (a retry) leaves them: devices may show the first one's.
//
// $4 is MaxAge in seconds (readJobSQL).
//
// A user has at most $3 pushes in flight (UserInFlight): a user whose
// devices' push services never answer holds that many workers for Timeout,
// not all of them. Users at the limit are passed over by the scan, and of
// the jobs locked (more than the limit of one user's may be: rows locked
// and not claimed are released at commit) only the oldest up to the limit
// are claimed.
const claimSQL = `
WITH l AS (
    SELECT p.id, p.user_id, p.not_before, p.state = 'pending' AS first_claim FROM push_job p
    WHERE p.state <> 'sent' AND p.not_before <= now() AND (p.lease_until IS NULL OR p.lease_until < now())
      AND NOT (p.kind = 'message' AND p.state = 'sending' AND p.unsent_claim IS NOT DISTINCT FROM p.claims AND p.lease_until IS NOT NULL)
      AND NOT EXISTS (
          SELECT 1 FROM push_job o
          WHERE o.conversation_id = p.conversation_id AND o.user_id = p.user_id AND o.id <> p.id AND o.state <> 'sent'
            AND (o.lease_until >= now() OR (p.kind = 'message' AND o.kind IN ('remove', 'update'))
                 OR (p.kind = 'message' AND o.kind = 'message' AND o.id > p.id)
                 OR (o.kind = 'message' AND o.state = 'sending' AND o.unsent_claim IS NOT DISTINCT FROM o.claims AND o.lease_until IS NOT NULL)))
      AND (SELECT count(*) FROM push_job b WHERE b.user_id = p.user_id AND b.state = 'sending' AND b.lease_until >= now()) < $3
    ORDER BY p.not_before LIMIT $1 FOR UPDATE OF p SKIP LOCKED
), c AS (
    SELECT id, first_claim FROM (
        SELECT l.id, l.user_id, l.first_claim, row_number() OVER (PARTITION BY l.user_id ORDER BY l.not_before, l.id) AS r FROM l
    ) x
    WHERE x.r + (SELECT count(*) FROM push_job b WHERE b.user_id = x.user_id AND b.state = 'sending' AND b.lease_until >= now()) <= $3
), j AS (
    UPDATE push_job p SET state = 'sending', lease_until = now() + make_interval(secs => $2),
                          attempts = p.attempts + 1, claims = p.claims + 1, count = p.count + COALESCE(o.n, 0),
                          recalled_older = p.recalled_older + COALESCE(ro.t, '{}'),
                          -- a notification taken waiting: nothing of this
                          -- claim is sent until markStarted clears it
                          unsent_claim = CASE WHEN p.state = 'pending' AND p.kind = 'message' THEN p.claims + 1 END,
                          (covered, seq) = (
        -- A first claim (pending: nothing of it reached a device) keeps
        -- the messages its notification stands for (counts, and previews
        -- the newest of), when there are any (else it is skipped): a
        -- recall of one it left out (recalled, acknowledged by then) has
        -- nothing to take out of it.
        SELECT CASE WHEN p.state = 'pending' AND k.covered IS NOT NULL THEN k.covered ELSE a.covered END,
               CASE WHEN p.state = 'pending' AND k.covered IS NOT NULL THEN upper(k.covered) - 1 ELSE p.seq END
        FROM (SELECT p.covered + COALESCE(o.covered, '{}') AS covered) a
        LEFT JOIN LATERAL (
            SELECT range_agg(int8range(m.seq, m.seq + 1)) AS covered
            FROM member_watermark w
            JOIN conversation c ON c.id = w.conversation_id
            LEFT JOIN member_settings s ON s.conversation_id = w.conversation_id AND s.user_id = w.user_id
            JOIN message m ON m.conversation_id = w.conversation_id
            WHERE w.conversation_id = p.conversation_id AND w.user_id = p.user_id
              AND m.seq >= lower(a.covered) AND m.seq < upper(a.covered) AND a.covered @> m.seq
              AND m.seq > GREATEST(w.last_delivered_seq, w.last_read_seq) AND ` + showsSQL + `
        ) k ON true)
    FROM c LEFT JOIN LATERAL (
        SELECT range_agg(x) AS covered, sum(o.count)::int AS n
        FROM push_job q JOIN push_job o ON o.conversation_id = q.conversation_id AND o.user_id = q.user_id
        CROSS JOIN LATERAL unnest(o.covered) x
        WHERE q.id = c.id AND q.kind = 'message' AND o.kind = 'message' AND o.state = 'sending' AND o.id < q.id
    ) o ON true
    LEFT JOIN LATERAL (
        -- What the notifications it takes over owed should their claims
        -- reach no device (recalled_older): now owed should this one
        -- reach none.
        SELECT range_agg(x) AS t
        FROM push_job q JOIN push_job o ON o.conversation_id = q.conversation_id AND o.user_id = q.user_id
        CROSS JOIN LATERAL unnest(o.recalled_older) x
        WHERE q.id = c.id AND q.kind = 'message' AND o.kind = 'message' AND o.state = 'sending' AND o.id < q.id
    ) ro ON true
    WHERE p.id = c.id
    RETURNING p.id, p.kind, p.user_id, p.conversation_id, p.seq, p.count, p.sender_id, p.attempts, p.claims, p.device_ids, p.covered, p.kafka_sent, p.refused,
              p.unsent_claim IS DISTINCT FROM p.claims AS started, c.first_claim
), taken AS (
    UPDATE push_job o SET state = 'sent', lease_until = NULL, device_ids = NULL
    FROM j
    WHERE j.kind = 'message' AND o.conversation_id = j.conversation_id AND o.user_id = j.user_id
      AND o.kind = 'message' AND o.state = 'sending' AND o.id < j.id
), last AS (
    INSERT INTO push_last (user_id, conversation_id, pushed_at)
    SELECT DISTINCT user_id, conversation_id, now() FROM j WHERE attempts = 1 AND kind = 'message'
    ON CONFLICT (user_id, conversation_id) DO UPDATE SET pushed_at = EXCLUDED.pushed_at
)` + readJobSQL

// recheckSQL reads claimed job $1 again, as claimSQL read it, when it is
// still this claim's ($2 its claims, its lease not over), and renews
// its lease for $3 seconds (the send starts now; $4 is MaxAge): a push that waited in
// the queue is sent as things are when it leaves (recheck). No row: the
// lease ran out, and the job is another claim's now.
const recheckSQL = `
WITH j AS (
    UPDATE push_job SET lease_until = now() + make_interval(secs => $3)
    WHERE id = $1 AND claims = $2 AND state = 'sending' AND lease_until > now()
    -- first_claim is the claim's to know (the worker keeps it)
    RETURNING id, kind, user_id, conversation_id, seq, count, sender_id, attempts, claims, device_ids, covered, kafka_sent, refused,
              unsent_claim IS DISTINCT FROM claims AS started, false AS first_claim
)` + readJobSQL

// readJobSQL reads, for the claimed jobs j, what sending them needs
// (claimSQL), and whether the newest message a notification would show is
// older than MaxAge ($4 seconds) by now: the decision never pushes such a
// message, and a retry or a push that waited out the minimum interval
// must not either.
const readJobSQL = `
SELECT j.id, j.kind, j.user_id, j.conversation_id, COALESCE(lm.seq, j.seq),
       -- the notification's count, never push_job.count (the decisions'
       -- tally, doc.go); a remove or an update shows none
       COALESCE(lm.n, 0), COALESCE(lm.sender_id, j.sender_id), j.attempts, j.claims, j.device_ids IS NOT NULL,
       lm.seq IS NOT NULL OR ud.body IS NOT NULL OR (j.kind = 'remove' AND EXISTS (
           -- a notification of the pair that may be on a device: a remove
           -- for one that never left the queue (recheck) has nothing to take away
           SELECT 1 FROM push_job n WHERE n.conversation_id = j.conversation_id AND n.user_id = j.user_id
             AND n.kind = 'message' AND n.state <> 'pending')),
       COALESCE(why.reason, ''),
       -- a member; for an update, one since before its message (not
       -- one who left and came back): the others may not read its text
       w.user_id IS NOT NULL AND (j.kind <> 'update' OR w.join_seq < j.seq),
       COALESCE(GREATEST(w.last_delivered_seq, w.last_read_seq), 0),
       COALESCE(c.type, ''), COALESCE(c.title, ''), COALESCE(lm.body, ud.body, ''), lm.created_at,
       COALESCE(lm.created_at <= now() - make_interval(secs => $4), false),
       -- A conversation whose newest message is at or before the
       -- watermark has none unread (its entry there counts them all):
       -- only the others are looked up, not every one of a user in
       -- thousands of groups at every push.
       (SELECT COALESCE(sum(chat_unread(c2.id, m2.last_read_seq, c2.message_count)), 0)::bigint
        FROM conversation_member m2 JOIN conversation c2 ON c2.id = m2.conversation_id
        WHERE m2.user_id = j.user_id AND c2.last_message_seq > m2.last_read_seq),
       COALESCE((SELECT json_agg(json_build_object('id', d.id, 'platform', d.platform, 'address', d.address,
                                                   'p256dh', d.p256dh, 'auth', d.auth, 'appId', d.app_id, 'locale', d.locale))
                 FROM push_device d
                 WHERE d.user_id = j.user_id AND (j.device_ids IS NULL OR d.id = ANY(j.device_ids))
                   AND NOT d.id = ANY(COALESCE(j.refused, '{}'))), '[]'),
       COALESCE(j.kafka_sent, '{}'),
       -- a remove's recalled messages (its covered), oldest first
       CASE WHEN j.kind = 'remove' THEN ARRAY(SELECT s FROM unnest(j.covered) x, generate_series(lower(x), upper(x) - 1) s ORDER BY s)
            ELSE '{}' END,
       COALESCE(ed.seq, 0), j.first_claim, j.started
FROM j
LEFT JOIN member_watermark w ON w.conversation_id = j.conversation_id AND w.user_id = j.user_id
LEFT JOIN conversation c ON c.id = j.conversation_id
LEFT JOIN member_settings s ON s.conversation_id = j.conversation_id AND s.user_id = j.user_id
LEFT JOIN LATERAL (
    -- A message of files alone previews as what it is (as the inbox
    -- shows it), not as an empty text.
    SELECT m.seq, m.sender_id, ` + previewSQL + ` AS body, m.created_at,
           -- the count: what the user's devices have not got (acknowledged
           -- or read meanwhile do not count; reactions between them neither)
           (count(*) FILTER (WHERE m.seq > COALESCE(GREATEST(w.last_delivered_seq, w.last_read_seq), 0)) OVER ())::int AS n
    FROM message m
    WHERE j.kind = 'message' AND m.conversation_id = j.conversation_id
      AND m.seq >= lower(j.covered) AND m.seq < upper(j.covered) AND j.covered @> m.seq
      AND ` + showsSQL + `
    ORDER BY m.seq DESC LIMIT 1
) lm ON true
LEFT JOIN LATERAL (
    -- An update's message as it reads now, while it is not recalled and
    -- the pair's newest claimed notification (what its devices show)
    -- still shows it: else there is nothing to change (a newer
    -- notification replaced it, or a remove took the message out).
    SELECT ` + previewSQL + ` AS body FROM message m
    WHERE j.kind = 'update' AND m.conversation_id = j.conversation_id AND m.seq = j.seq AND m.recalled_at IS NULL
      AND EXISTS (SELECT 1 FROM push_job n
                  WHERE n.conversation_id = j.conversation_id AND n.user_id = j.user_id AND n.kind = 'message'
                    AND n.state <> 'pending' AND n.seq = j.seq AND n.covered @> j.seq
                    AND NOT EXISTS (SELECT 1 FROM push_job o
                                    WHERE o.conversation_id = n.conversation_id AND o.user_id = n.user_id
                                      AND o.kind = 'message' AND o.state <> 'pending' AND o.id > n.id))
) ud ON true
LEFT JOIN LATERAL (
    -- The edit the text read (lm's, ud's) is of, its newest: devices
    -- order the texts of one message by it (a push service keeps no
    -- order between an update and the notification or update before it).
    SELECT max(x.seq) AS seq FROM message x
    WHERE x.conversation_id = j.conversation_id AND x.kind = 'edit'
      AND x.target_seq = CASE WHEN lm.seq IS NOT NULL THEN lm.seq WHEN ud.body IS NOT NULL THEN j.seq END
) ed ON true
LEFT JOIN LATERAL (
    -- Why a notification has no message left to show (lm), the reason its
    -- skip is counted under: the first of lm's conditions its covered
    -- messages all fail.
    SELECT CASE
        WHEN NOT COALESCE(bool_or(m.recalled_at IS NULL), false) THEN 'recalled'
        WHEN NOT COALESCE(bool_or(m.recalled_at IS NULL AND m.seq > w.join_seq), false) THEN 'not_member'
        WHEN NOT COALESCE(bool_or(m.recalled_at IS NULL AND m.seq > w.join_seq AND ` + unblockedSQL + `), false) THEN 'blocked'
        ELSE 'muted' END AS reason
    FROM message m
    WHERE j.kind = 'message' AND lm.seq IS NULL AND m.conversation_id = j.conversation_id
      AND m.seq >= lower(j.covered) AND m.seq < upper(j.covered) AND j.covered @> m.seq
      AND m.kind = 'message'
    HAVING j.kind = 'message' AND lm.seq IS NULL -- no row (and no reason) for the others
) why ON true`

// showsSQL is whether a notification of member w.user_id's may show
// message m (count it, preview it when it is the newest): a message, not
// recalled, sent since they are a member (not before they left and came
// back), which may wake them (wakesSQL; c the conversation, s their
// settings of it).
const showsSQL = `m.kind = 'message' AND m.recalled_at IS NULL AND m.seq > w.join_seq AND ` + wakesSQL

// previewSQL is message m's text as a preview shows it: a message of
// files alone as what it is (as the inbox shows it), not as an empty
// text.
const previewSQL = `CASE WHEN m.body <> '' OR m.msg_type IS NULL THEN m.body
                WHEN m.msg_type = 'image' THEN '📷 Photo' WHEN m.msg_type = 'audio' THEN '🎤 Voice message'
                WHEN m.msg_type = 'video' THEN '🎬 Video' ELSE '📎 File' END`

// device is a push target as the sender reads it.
type device struct {
	ID       int64  `json:"id"`
	Platform string `json:"platform"`
	Address  string `json:"address"`
	P256dh   string `json:"p256dh"`
	Auth     string `json:"auth"`
	AppID    string `json:"appId"`
	Locale   string `json:"locale"`
}

// job is one claimed push: a notification, a remove (seq the newest
// recalled message, recalled all those its notification stood for) or an
// update (seq the edited message its notification shows, body its text
// now).
type job struct {
	id, user, conv, seq, sender int64
	count, attempts             int  // count: a notification's, readJobSQL (0 for the others)
	claims                      int  // which claim of the job this is (push_job.claims)
	owedAgain                   bool // an earlier claim's send left devices owed (push_job.device_ids)
	kind                        string
	remove, update              bool   // kind is TypeRemove, TypeUpdate
	live                        bool   // a remove, an update or a notification with something to show or change
	silenced                    string // why a notification is not live: a skip reason
	member                      bool
	acked                       int64
	convType, title, body       string
	msgAt                       *time.Time
	expired                     bool // its message is older than MaxAge
	badge                       int64
	devices                     []device
	kafkaSent                   []int64   // devices Kafka took this push for in an earlier attempt
	recalled                    []int64   // a remove's recalled messages, oldest first
	editSeq                     int64     // the edit body is the text of (0: as sent)
	claimed                     time.Time // when this node read it
	// firstClaim: the claim found it waiting (pending): no claim before
	// it sent anything of it (handBack)
	firstClaim bool
	// started: not a claim that took it waiting and sent nothing yet
	// (push_job.unsent_claim): a claim before it may have sent it, or
	// this one did (markStarted)
	started bool
}

// recheckAfter is how long a claimed push may wait in the queue before it
// is read again ahead of sending (recheck): its message may have been
// recalled or read, its sender blocked, the conversation muted or left, a
// device deleted or moved to another user meanwhile. A push taken at once
// goes as the claim read it.
const recheckAfter = 100 * time.Millisecond

// outcome of one device's send.
type outcome int

const (
	sentOK outcome = iota
	sentGone
	sentRetry
	sentFailed
	// sentFailedHandedOff: one output refused the push for good, but
	// another (Kafka, with the webhook too) accepted it: it may be on the
	// device, so its notification is kept as shown (a recall removes it).
	sentFailedHandedOff
)

// result of one job, written back by the result writer.
type result struct {
	id       int64
	attempts int
	claims   int     // the claim it is the result of: written only while the job is on it
	gone     []int64 // devices to delete (404/410)
	// refused: devices that refused the push for good. Recorded with a
	// release (push_job.refused), so the next claims leave them out; a
	// retry's device_ids leave them out already.
	refused []int64
	retry   []int64 // devices still owed
	after   time.Duration
	release bool // not attempted (shutdown): hand the claim back as it was
	// back: a release of a notification's first claim, nothing of it
	// sent: it waits again (pending), as before the claim (handBack)
	back    bool
	uncount bool // retry: sends were cancelled by a stopping node, no attempt
	// kafkaSent: devices Kafka accepted the push for whose webhook send
	// is owed again (retry, release): not written to Kafka again.
	kafkaSent []int64
	lost      bool // not attempted, the claim is over (recheck): write nothing
	skipped   bool // no device was sent to: not needed (any more)
	// shown: a notification that may be on a device (sent to one now or
	// in an earlier attempt), kept as the pair's sent one for recalls.
	shown bool
	// reached: this claim's send reached a device (a push service or
	// Kafka took it): the pair's minimum interval counts from it.
	reached bool
}

// send claims due jobs into the bounded queue, runs the workers and the
// result writer, until ctx is done.
func (p *Pusher) send(ctx context.Context) {
	queue := make(chan *job, p.cfg.QueueSize)
	results := make(chan result, p.cfg.QueueSize+p.cfg.Workers)
	sendCtx, cancelSends := context.WithCancel(context.Background())
	var workers sync.WaitGroup
	for range p.cfg.Workers {
		workers.Add(1)
		go func() {
			defer workers.Done()
			for j := range queue {
				if ctx.Err() != nil {
					results <- handBack(j)
					continue
				}
				if time.Since(j.claimed) >= recheckAfter {
					fresh, err := p.recheck(sendCtx, j)
					if err != nil && sendCtx.Err() != nil {
						// Stopping cancelled the read: the claim is
						// handed back as a queued one is (only while
						// it is still this claim).
						results <- handBack(j)
						continue
					}
					if err != nil && !p.backs.handBack(j.id) {
						// Its re-reads failed within a lease of a
						// hand-back of it that PostgreSQL's failure
						// caused (below, or a failed send-start mark,
						// process; failedBacks): a failure that persists
						// (PostgreSQL too slow to answer them in time),
						// which handing it back again would repeat
						// claim after claim, its attempt given back each
						// time. It waits out its lease, as a claim whose
						// node died: a notification's first claim is
						// then taken back (takeBackSQL), a retry, a
						// remove or an update charged the attempt.
						p.m.errors.WithLabelValues("db").Inc()
						p.log.Warn("push: reading a queued push again failed again; it is sent when its lease ends", "err", err)
						results <- result{id: j.id, lost: true}
						continue
					}
					if err != nil {
						// Read again and again in vain (recheck): only
						// this worker knows that nothing of the claim
						// went out, so it hands it back, as a stopping
						// node does (written only while the claim holds
						// it): left to wait out its lease, a retry, a
						// remove or an update would be charged an
						// attempt for the claim after it.
						p.m.errors.WithLabelValues("db").Inc()
						p.log.Warn("push: reading a queued push again failed; it is handed back unsent", "err", err)
						results <- handBack(j)
						continue
					}
					if fresh == nil {
						results <- result{id: j.id, lost: true}
						continue
					}
					// Whether the claim found it waiting is the claim's
					// to know (handBack).
					fresh.firstClaim = j.firstClaim
					j = fresh
				}
				results <- p.process(sendCtx, j)
			}
		}()
	}
	writerDone := make(chan struct{})
	go func() { defer close(writerDone); p.writeResults(results) }()

	p.claimLoop(ctx, queue)
	// Stop: sends in flight are cancelled (their devices are owed again);
	// queued jobs are handed back untouched.
	cancelSends()
	close(queue)
	workers.Wait()
	close(results)
	<-writerDone
}

// failedBacks remembers, for a lease, the pushes this node handed back
// because PostgreSQL failed it: their re-reads all failed (recheck), or
// the mark right before a send (markStarted). One that fails so again
// within it is left to wait out its lease instead, so a failure that
// persists does not have it claimed and handed back over and over, its
// attempt given back each time. Safe for concurrent use.
type failedBacks struct {
	mu    sync.Mutex
	lease time.Duration
	at    map[int64]time.Time // job id -> when it was handed back
}

// handBack says whether job id, which PostgreSQL failed, is handed back
// now (and notes it): not when it was within a lease.
func (u *failedBacks) handBack(id int64) bool {
	u.mu.Lock()
	defer u.mu.Unlock()
	now := time.Now()
	for k, at := range u.at {
		if now.Sub(at) >= u.lease {
			delete(u.at, k)
		}
	}
	if _, ok := u.at[id]; ok {
		return false
	}
	u.at[id] = now
	return true
}

// handBack is the result of claim j handed back unsent by a stopping
// node (it was queued, or being read again): the claim goes back as it
// was. A notification's first claim makes it a waiting one again
// (pending): nothing of it reached a device, so a recall takes its
// messages out of it and sends no remove for it, and an edit sends no
// update. So is a claim whose send a stopping node cut before any
// request of it went out (process). A claim one of whose requests went
// out is never handed back so: its outcome is not known (a cancelled
// send, a node that died mid-send), so the notification may be on a
// device.
func handBack(j *job) result {
	return result{id: j.id, attempts: j.attempts, claims: j.claims, release: true, back: j.firstClaim && j.kind == TypeMessage}
}

func (p *Pusher) claimLoop(ctx context.Context, queue chan *job) {
	t := time.NewTicker(p.cfg.Tick)
	defer t.Stop()
	lease := p.lease()
	fails := 0
	var lastOverflow time.Time
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		case <-p.kick:
		}
		for ctx.Err() == nil {
			free := cap(queue) - len(queue)
			p.m.queue.Set(float64(len(queue)))
			if free == 0 {
				if time.Since(lastOverflow) >= time.Second {
					p.countOverflow(ctx)
					lastOverflow = time.Now()
				}
				break
			}
			jobs, err := p.claim(ctx, min(free, 200), lease)
			if err != nil {
				if ctx.Err() == nil {
					fails++
					p.m.errors.WithLabelValues("db").Inc()
					if fails == 1 {
						p.log.Warn("push: claiming pushes failed, retrying", "err", err)
					}
				}
				break
			}
			fails = 0
			for _, j := range jobs {
				queue <- j
			}
			if len(jobs) < min(free, 200) {
				break
			}
		}
	}
}

// lease is how long a claim holds a push: its sends end well within it.
func (p *Pusher) lease() time.Duration { return 3*p.cfg.Timeout + 5*time.Second }

// overflowSQL counts the due pushes, at most 10,000 (a backlog must not
// make counting it costly), in push_job_due_idx's order, as anyDueSQL
// asks: unordered, the planner may read the table from its start when
// it expects due rows to be many, and the rows before the due ones are
// read in vain (36 ms for 200,000 due behind 300,000 sent, against 2.3 ms
// through the index; docs/benchmarks.md, "Push: the due jobs' scans").
const overflowSQL = `SELECT count(*) FROM (SELECT 1 FROM push_job
WHERE state <> 'sent' AND not_before <= now() AND (lease_until IS NULL OR lease_until < now())
ORDER BY not_before LIMIT 10000) due`

// countOverflow counts the due pushes this node's full queue leaves in
// PostgreSQL, for this or another node to take (at most once a second,
// overflowSQL).
func (p *Pusher) countOverflow(ctx context.Context) {
	var n int64
	err := p.cfg.Pool.QueryRow(ctx, overflowSQL).Scan(&n)
	if err == nil && n > 0 {
		p.m.overflow.Add(float64(n))
	}
}

// anyDueSQL is claimSQL's question without its work: is a job due (a
// row, or none)? Every node asks it every Tick, mostly to hear no:
// claimSQL is planned at each call (chatd's connections plan every
// statement with its arguments), 1.4 ms a time, 1.4% of a core on an
// idle node; this is planned in a tenth of that.
//
// It reads push_job_due_idx in order (ORDER BY not_before LIMIT 1, not
// EXISTS, which drops an ORDER BY): it passes over the jobs in flight
// and stops at the first due one. Asked as EXISTS, the planner, when its
// statistics say many rows are due, reads the table from its start
// instead, expecting a due one soon, and where they lie after the sent
// ones (sent rows first in the heap, or rows that turned sent in place
// of due ones) it reads every sent row first: 35 to 59 ms with 300,000
// sent before 200,000 due, 57 ms with none due at all after a burst
// (stale statistics), every Tick on every node; through the index
// 0.01 to 0.07 ms on every layout measured (docs/benchmarks.md, "Push:
// the due jobs' scans").
const anyDueSQL = `SELECT true FROM push_job
WHERE state <> 'sent' AND not_before <= now() AND (lease_until IS NULL OR lease_until < now())
ORDER BY not_before LIMIT 1`

func (p *Pusher) claim(ctx context.Context, n int, lease time.Duration) ([]*job, error) {
	// Not cancelled by a stopping Run: a claim that committed but went
	// unread would leave its jobs to wait out their lease; read, they are
	// handed back at once.
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
	defer cancel()
	var due bool
	if err := p.cfg.Pool.QueryRow(ctx, anyDueSQL).Scan(&due); errors.Is(err, pgx.ErrNoRows) {
		return nil, nil
	} else if err != nil {
		return nil, fmt.Errorf("claim pushes: look for due ones: %w", err)
	}
	// A first claim of a notification locks it and then its pair's
	// push_last row, a decision that writes a newer one of the pair takes
	// that row and then the notifications (a recall's, an edit's):
	// PostgreSQL may abort either as a deadlock. The claim, rolled back
	// whole (nothing was sent), is made again after a pause of
	// milliseconds, as the decision is (pgerr.RetryConflicts): not a
	// failure, and its other due pushes do not wait for the next tick.
	var (
		jobs []*job
		owed owedCounts
	)
	// A claim whose COMMIT's answer was lost is known to have committed
	// (inTx asks): its jobs, read in it, are this node's to send, and not
	// left to wait out their lease unsent.
	err := pgerr.RetryConflicts(ctx, func() error {
		return inTx(ctx, p.cfg.Pool, p.cfg.Pool, func(tx pgx.Tx, xid *string) error {
			var err error
			jobs, owed, err = p.claimInTx(ctx, tx, n, lease, xid)
			return err
		})
	})
	if err != nil {
		return nil, fmt.Errorf("claim pushes: %w", err)
	}
	p.countOwed(owed)
	return jobs, nil
}

// claimLockSQL serialises claims across nodes until the claim's
// transaction ends: claimSQL counts a user's pushes in flight and a
// pair's leased job in its snapshot, so two claims at once (SKIP LOCKED
// passing over each other's rows) could each take a user's UserInFlight,
// or two removes of one pair. Taken first, it makes the claim's snapshot
// (a new one per statement) include every claim before it. A claim is one
// statement, run only when a job is due: nodes wait on each other for
// milliseconds.
const claimLockSQL = `SELECT pg_advisory_xact_lock(hashtextextended('chat.push.claim', 0))`

// takeBackSQL hands back, as a stopping node does (handBack), the
// notifications whose claim's lease ran out before its send started
// (push_job.unsent_claim: it waited in a node's queue, whose recheck then
// finds the lease gone and sends nothing): nothing of them reached a
// device. Each waits again (pending, merged into the pair's notification
// that came to wait meanwhile), the pair's last push is forgotten (the
// claim recorded it, and buzzed nothing), a recall or an edit decided
// during the claim owes nothing for it (unsentOwedSQL), and the claim
// that follows is a first claim. claimSQL passes such a claim, and the
// other jobs of its pair, over until it is taken back: one a decision or
// a late result holds now is taken back by a later claim.
// It takes back exactly the jobs $1 that lockUnstartedSQL locked, in a
// statement whose snapshot is taken after those locks.
const takeBackSQL = `
WITH w AS (
    SELECT p.id, p.user_id, p.conversation_id, p.seq, p.count, p.covered, p.not_before, p.sender_id, p.recalled_older, p.edited_older
    FROM push_job p
    WHERE p.id = ANY($1::bigint[]) AND ` + unstartedSQL + `
), last AS (
    UPDATE push_last l SET pushed_at = '-infinity'
    FROM w WHERE l.user_id = w.user_id AND l.conversation_id = w.conversation_id
)` + waitAgainSQL

// unstartedSQL is whether job p is a notification whose claim's lease ran
// out before its send started (takeBackSQL). Its not_before is not asked:
// it was due when claimed, and only a retry, which follows a send that
// started, sets it later. So the one partial index that fits is
// push_job_sending_idx (the claims in flight and waiting for a retry),
// however many waiting jobs are due: 0.1 ms with 500 in flight and
// 20,000 waiting, due or not.
const unstartedSQL = `p.state = 'sending' AND p.lease_until < now() AND p.kind = 'message'
  AND p.unsent_claim = p.claims`

// lockUnstartedSQL locks what takeBackSQL takes back, in a statement of
// its own (as resultBatch does the claims that reached no device): a
// remove or an update a decision owed for them and committed before it
// let go of them is seen by takeBackSQL, whose snapshot is taken after.
// It answers their ids, which takeBackSQL takes back and no other job: a
// scan of its own could find one this one passed over (past its LIMIT,
// or locked then), unlocked.
const lockUnstartedSQL = `SELECT p.id FROM push_job p WHERE ` + unstartedSQL + `
ORDER BY p.id DESC LIMIT 200 FOR UPDATE OF p SKIP LOCKED`

// claimInTx runs claimSQL in tx under claimLockSQL, after takeBackSQL
// (lockUnstartedSQL in the same round trip as the lock; takeBackSQL only
// when that found any, a round trip of its own). owed is what
// takeBackSQL decided, for the metrics once tx commits; xid gets tx's id
// (inTx).
func (p *Pusher) claimInTx(ctx context.Context, tx pgx.Tx, n int, lease time.Duration, xid *string) (jobs []*job, owed owedCounts, err error) {
	b := &pgx.Batch{}
	b.Queue(claimLockSQL)
	b.Queue(xactIDSQL)
	b.Queue(lockUnstartedSQL)
	br := tx.SendBatch(ctx, b)
	if _, err := br.Exec(); err != nil {
		_ = br.Close()
		return nil, owed, fmt.Errorf("take the claim lock: %w", err)
	}
	if err := br.QueryRow().Scan(xid); err != nil {
		_ = br.Close()
		return nil, owed, fmt.Errorf("read the claim's transaction id: %w", err)
	}
	rows, err := br.Query()
	var unstarted []int64
	if err == nil {
		unstarted, err = pgx.CollectRows(rows, pgx.RowTo[int64])
	}
	if cerr := br.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return nil, owed, fmt.Errorf("lock the claims that never sent: %w", err)
	}
	if len(unstarted) > 0 {
		if err := tx.QueryRow(ctx, takeBackSQL, unstarted).Scan(&owed.removes, &owed.updates); err != nil {
			return nil, owed, fmt.Errorf("take back the claims that never sent: %w", err)
		}
	}
	jobs, err = p.readJobs(ctx, tx, claimSQL, n, lease.Seconds(), p.cfg.UserInFlight, p.cfg.MaxAge.Seconds())
	return jobs, owed, err
}

// startSQL marks claim $2 of job $1 as started (push_job.unsent_claim), while
// it is still that claim's and leased: right before its first request
// goes out. No row: the lease ran out, the job is another claim's (or
// will be), and nothing is sent.
const startSQL = `UPDATE push_job SET unsent_claim = NULL
WHERE id = $1 AND claims = $2 AND state = 'sending' AND lease_until > now()`

// markStarted runs startSQL for j: false when the claim is over.
func (p *Pusher) markStarted(ctx context.Context, j *job) (bool, error) {
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	tag, err := p.cfg.Pool.Exec(ctx, startSQL, j.id, j.claims)
	if err != nil {
		return false, fmt.Errorf("mark a push's send started: %w", err)
	}
	return tag.RowsAffected() == 1, nil
}

// recheckTries is how many times recheck runs recheckSQL while it fails.
const recheckTries = 3

// recheck reads claimed job j again (recheckSQL): nil when the claim is
// over (its lease ran out: the job is another claim's, or will be).
//
// A failure, its answer lost with the connection, may hide a renewal
// PostgreSQL committed: left at that, the job would wait out its whole
// lease unsent (and a retry, a remove or an update be charged an attempt
// for the claim after it). recheckSQL is run again instead, a few times
// within recheck's 10 s: while the claim holds the job (claims, and a
// lease not over) it renews the lease and reads the job as the lost run
// would have, so it answers what that did, also when it never committed;
// once the claim is over it answers no row either way. Asking PostgreSQL
// by the transaction's id (pg_xact_status, as inTx does) would need an
// explicit transaction, BEGIN and COMMIT, for every recheck.
func (p *Pusher) recheck(ctx context.Context, j *job) (*job, error) {
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	var (
		jobs []*job
		err  error
	)
	for try, pause := 0, 50*time.Millisecond; ; try, pause = try+1, 2*pause {
		jobs, err = p.readJobs(ctx, p.cfg.Pool, recheckSQL, j.id, j.claims, p.lease().Seconds(), p.cfg.MaxAge.Seconds())
		if err == nil || try+1 == recheckTries || ctx.Err() != nil {
			break
		}
		p.log.Info("push: reading a queued push again failed; asking again", "err", err)
		select {
		case <-ctx.Done():
		case <-time.After(pause):
		}
	}
	if err != nil || len(jobs) == 0 {
		return nil, err
	}
	return jobs[0], nil
}

// querier is a pool or a transaction.
type querier interface {
	Query(ctx context.Context, sql string, args ...any) (pgx.Rows, error)
}

// readJobs runs a statement answering readJobSQL's rows.
func (p *Pusher) readJobs(ctx context.Context, q querier, sql string, args ...any) ([]*job, error) {
	rows, err := q.Query(ctx, sql, args...)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var out []*job
	now := time.Now()
	for rows.Next() {
		j := &job{claimed: now}
		var devs []byte
		if err := rows.Scan(&j.id, &j.kind, &j.user, &j.conv, &j.seq, &j.count, &j.sender, &j.attempts, &j.claims, &j.owedAgain, &j.live,
			&j.silenced, &j.member, &j.acked, &j.convType, &j.title, &j.body, &j.msgAt, &j.expired, &j.badge, &devs, &j.kafkaSent, &j.recalled, &j.editSeq, &j.firstClaim, &j.started); err != nil {
			return nil, err
		}
		if err := json.Unmarshal(devs, &j.devices); err != nil {
			return nil, fmt.Errorf("decode devices: %w", err)
		}
		j.remove, j.update = j.kind == TypeRemove, j.kind == TypeUpdate
		out = append(out, j)
	}
	return out, rows.Err()
}

// process sends one job to its devices, each at the same time.
func (p *Pusher) process(ctx context.Context, j *job) result {
	r := result{id: j.id, attempts: j.attempts, claims: j.claims, skipped: true}
	// Earlier attempts may have reached a device, and so may an earlier
	// claim whose send a stopping node cancelled (no attempt, but only
	// ever after a device, or Kafka, got the push: else it is handed
	// back).
	notice := j.kind == TypeMessage
	maybeShown := notice && (j.attempts > 1 || j.owedAgain)
	if j.update && j.live && !j.member {
		// A former member's devices may show the message's old text,
		// and they may not read the new one (written after they left):
		// the message is taken off them instead, as a recall's remove
		// does, which carries nothing of the conversation.
		j.update, j.remove, j.recalled = false, true, []int64{j.seq}
	}
	switch {
	case !j.member && !j.remove:
		// A remove goes to a former member too: their devices may show
		// the recalled message, and it carries nothing else. So an
		// earlier attempt's notification is kept for its recall.
		p.m.skipped.WithLabelValues("not_member").Inc()
		r.shown = maybeShown
		return r
	case !j.live && !notice:
		// A remove for a notification that never reached a device, or
		// an update of a text no notification shows any more.
		p.m.skipped.WithLabelValues("not_shown").Inc()
		return r
	case !j.live:
		// Every message it stood for was recalled, or its user blocked
		// their senders or muted the conversation since: j.silenced
		// says which.
		p.m.skipped.WithLabelValues(j.silenced).Inc()
		r.shown = maybeShown
		return r
	case notice && j.acked >= j.seq:
		// The app came to the foreground meanwhile: nothing to wake.
		p.m.skipped.WithLabelValues("acked").Inc()
		r.shown = maybeShown
		return r
	case notice && j.expired:
		// A retry, or a push that waited out the minimum interval, due
		// after its message is older than MaxAge: too late to wake.
		p.m.skipped.WithLabelValues("expired").Inc()
		r.shown = maybeShown
		return r
	case len(j.devices) == 0:
		p.m.skipped.WithLabelValues("no_devices").Inc()
		r.shown = maybeShown
		return r
	case j.attempts > p.cfg.MaxAttempts:
		p.m.skipped.WithLabelValues("gave_up").Inc()
		p.log.Warn("push: giving up after retries", "user", j.user, "conversation", j.conv, "attempts", j.attempts-1)
		r.shown = maybeShown
		return r
	}
	r.skipped = false
	if notice && !j.started {
		// A notification's first send: marked before any request goes
		// out (startSQL), so that a claim whose lease runs out unsent is
		// told from one whose node died mid-send (takeBackSQL). A remove
		// or an update is claimed again as it was: its claim records no
		// push and may be taken over by nothing.
		ok, err := p.markStarted(ctx, j)
		switch {
		case err != nil && ctx.Err() != nil:
			// Stopping: nothing went out.
			return handBack(j)
		case err != nil && !p.backs.handBack(j.id):
			// It was handed back so (or after failed re-reads) within
			// a lease: a failure that persists, which handing it back
			// again would repeat claim after claim. It waits out its
			// lease: a mark PostgreSQL did not commit leaves it to be
			// taken back (takeBackSQL); one it did has it taken for a
			// send whose outcome is not known, as when PostgreSQL stays
			// out of reach until the lease ends.
			p.m.errors.WithLabelValues("db").Inc()
			p.log.Warn("push: marking a push's send started failed again; it is sent when its lease ends", "err", err)
			return result{id: j.id, lost: true}
		case err != nil:
			// The mark may have committed though its answer was lost
			// with the connection: the next claim would take the
			// claim for a started one (a recall meanwhile would send
			// a remove for a notification on no device). Only this
			// worker knows that nothing went out: it hands the claim
			// back, as a stopping node does.
			p.m.errors.WithLabelValues("db").Inc()
			p.log.Warn("push: marking a push's send started failed; it is handed back unsent", "err", err)
			return handBack(j)
		case !ok:
			// Its lease ran out (another claim's now, or soon): not sent
			// twice.
			return result{id: j.id, lost: true}
		}
	}
	n := p.notification(j)
	type devOut struct {
		id    int64
		o     outcome
		after time.Duration
		kafka bool // Kafka accepted it
		// cut: a retry because stopping cancelled the send before any
		// answer (an answer received is one, and was an attempt, also
		// when the stop came right after it)
		cut bool
		out bool // a request of it went out (deliver)
	}
	outs := make([]devOut, len(j.devices))
	var wg sync.WaitGroup
	for i, d := range j.devices {
		wg.Add(1)
		go func() {
			defer wg.Done()
			var out atomic.Bool
			o, after, kafka, cut := p.out.deliver(ctx, j, d, n, &out)
			outs[i] = devOut{d.ID, o, after, kafka, o == sentRetry && cut, out.Load()}
			p.m.sent.WithLabelValues(d.Platform, o.String()).Inc()
			if o == sentOK && notice && j.msgAt != nil {
				p.m.latency.Observe(time.Since(*j.msgAt).Seconds())
			}
		}()
	}
	wg.Wait()
	r.shown = maybeShown
	for _, o := range outs {
		switch o.o {
		case sentOK, sentFailedHandedOff:
			r.shown = notice
		case sentGone:
			r.gone = append(r.gone, o.id)
		case sentFailed:
			r.refused = append(r.refused, o.id)
		case sentRetry:
			r.retry = append(r.retry, o.id)
			r.after = max(r.after, o.after)
			if o.kafka {
				r.kafkaSent = append(r.kafkaSent, o.id)
			}
		}
	}
	// A service (or Kafka, whose consumer may show it) took the push for
	// a device: it may have buzzed one.
	r.reached = slices.ContainsFunc(outs, func(o devOut) bool { return o.o == sentOK || o.o == sentFailedHandedOff || o.kafka })
	if len(r.retry) > 0 && ctx.Err() != nil && !r.reached && !slices.ContainsFunc(outs, func(o devOut) bool { return o.out }) {
		// Stopping cut the send before any request of it went out (a
		// connection still being opened): nothing of it can be on a
		// device, so the claim is handed back as a queued one is, its
		// send not started (a device refused without a request, as an
		// endpoint on a private address is, keeps its answer).
		b := handBack(j)
		b.refused = r.refused
		return b
	}
	if len(r.retry) > 0 && ctx.Err() != nil && !slices.ContainsFunc(outs, func(o devOut) bool { return o.o == sentRetry && !o.cut }) {
		// Stopping cancelled every send owed again: that was no attempt
		// of theirs, so it does not count toward MaxAttempts. Sent to no
		// device (nor to Kafka, whose consumer may show it), the claim
		// goes back as a queued one does. A retry a service answered
		// before the stop was an attempt, and counts (the cut sends with
		// it: attempts are the push's), else repeated stops would retry
		// it beyond MaxAttempts.
		if !r.reached {
			// A device that answered for good (gone, or refused) has
			// its answer: the claim goes back without it.
			return result{id: j.id, attempts: j.attempts, claims: j.claims, gone: r.gone, refused: r.refused, release: true, kafkaSent: r.kafkaSent}
		}
		r.uncount = true
	}
	if len(r.retry) > 0 && !r.uncount {
		r.after = max(r.after, retry.Backoff(j.attempts, p.cfg.BackoffMin, p.cfg.BackoffMax))
	}
	return r
}

func (o outcome) String() string {
	switch o {
	case sentOK:
		return "ok"
	case sentGone:
		return "gone"
	case sentRetry:
		return "retry"
	default:
		return "failed"
	}
}

// resultTries is how many times writeResults writes a batch that did not
// commit.
const resultTries = 3

// writeResults records outcomes in batches (one transaction each), so a
// busy node writes back many pushes per round trip. Outcomes not yet
// written when a node dies are sent again after the lease: at most once
// more.
func (p *Pusher) writeResults(in <-chan result) {
	const maxBatch = 500
	var batch []result
	flush := func() {
		if len(batch) == 0 {
			return
		}
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		// A batch that did not commit (its connection died with its
		// answer, a COMMIT PostgreSQL says it aborted) is written
		// again: left unwritten, its pushes would wait out their leases
		// and go again (a notification twice, a push to a device that
		// was gone). Its statements are written only while each claim
		// holds its push, so a batch written late changes no later
		// claim. One that may have committed (PostgreSQL could not
		// tell) is not: written twice, a hand-back or a cancelled
		// send would give back two attempts.
		for try, pause := 1, 50*time.Millisecond; ; try, pause = try+1, 2*pause {
			err := p.applyResults(ctx, batch)
			if err == nil {
				break
			}
			if errors.Is(err, errMayHaveCommitted) || try == resultTries || ctx.Err() != nil {
				p.m.errors.WithLabelValues("db").Inc()
				p.log.Warn("push: recording push outcomes failed; their leases expire and they are sent again", "pushes", len(batch), "err", err)
				break
			}
			p.log.Info("push: recording push outcomes failed; writing them again", "pushes", len(batch), "err", err)
			select {
			case <-ctx.Done():
			case <-time.After(pause):
			}
		}
		batch = batch[:0]
	}
	t := time.NewTicker(20 * time.Millisecond)
	defer t.Stop()
	for {
		select {
		case r, ok := <-in:
			if !ok {
				flush()
				return
			}
			batch = append(batch, r)
			if len(batch) >= maxBatch {
				flush()
			}
		case <-t.C:
			flush()
		}
	}
}

// applyResults writes rs in one transaction. Its statements lock the
// jobs in no set order, and a decision's (recallSQL, updateSQL) lock a
// conversation's notifications newest first: PostgreSQL may abort either
// as a deadlock. The batch is then written again (pgerr.RetryConflicts),
// as the decider decides again: left unwritten, its pushes would stay
// claimed until their leases ran out and be sent again.
func (p *Pusher) applyResults(ctx context.Context, rs []result) error {
	var c batchCounts
	// Counted once committed: also when the COMMIT's answer was lost
	// (inTx asks what became of it).
	if err := pgerr.RetryConflicts(ctx, func() error {
		b := resultBatch(rs, &c)
		return inTx(ctx, p.cfg.Pool, p.cfg.Pool, func(tx pgx.Tx, xid *string) error {
			b.Queue(xactIDSQL).QueryRow(func(row pgx.Row) error { return row.Scan(xid) })
			return tx.SendBatch(ctx, b).Close()
		})
	}); err != nil {
		return fmt.Errorf("record push outcomes: %w", err)
	}
	p.m.devicesDeleted.Add(float64(c.deleted))
	p.countOwed(c.unsent)
	p.countOwed(c.back)
	return nil
}

// batchCounts is what a result batch did, for the metrics once it
// committed. Each is set, not added to, by its statement: a batch made
// again after a conflict counts once.
type batchCounts struct {
	deleted int64      // devices deleted
	unsent  owedCounts // decided for the claims that reached no device
	back    owedCounts // decided for the claims handed back
}

// owedCounts are the removes and updates a statement ending in
// owedCountsSQL decided.
type owedCounts struct{ removes, updates int64 }

// countOwed counts c in chat_push_removes_total and
// chat_push_updates_total, as the decider counts its own.
func (p *Pusher) countOwed(c owedCounts) {
	p.m.removes.Add(float64(c.removes))
	p.m.updates.Add(float64(c.updates))
}

// resultBatch queues the statements that write rs; c gets what they did.
func resultBatch(rs []result, c *batchCounts) *pgx.Batch {
	var (
		done, shown, gone, released, noPush, pushed []int64
		waiting                                     []int64
		doneClaims, shownClaims, pushedClaims       []int
		releasedClaims, noPushClaims, waitingClaims []int
		retries                                     []result
		b                                           pgx.Batch
	)
	// A result is written only while its claim holds the job: the same
	// claim (push_job.claims, which only goes up: attempts goes back down
	// when a claim is handed back or its send cancelled), still 'sending'.
	// One that comes back after its lease ran out (another claim's now,
	// or one that claim handed back) must not end, reschedule or release
	// the push.
	for _, r := range rs {
		gone = append(gone, r.gone...)
		if len(r.kafkaSent) > 0 && (r.release || len(r.retry) > 0) {
			b.Queue(`UPDATE push_job SET kafka_sent = COALESCE(kafka_sent, '{}') || $2
WHERE id = $1 AND claims = $3 AND state = 'sending'`, r.id, r.kafkaSent, r.claims)
		}
		if len(r.refused) > 0 && r.release {
			b.Queue(`UPDATE push_job SET refused = COALESCE(refused, '{}') || $2
WHERE id = $1 AND claims = $3 AND state = 'sending'`, r.id, r.refused, r.claims)
		}
		if r.reached && r.attempts > 1 && !r.lost && !r.release {
			// A retry that reached a device: the first claim's push was
			// forgotten if it reached none (noPush), and a device was
			// buzzed now.
			pushed, pushedClaims = append(pushed, r.id), append(pushedClaims, r.claims)
		}
		switch {
		case r.lost:
		case r.release:
			if r.back {
				waiting, waitingClaims = append(waiting, r.id), append(waitingClaims, r.claims)
			} else {
				released, releasedClaims = append(released, r.id), append(releasedClaims, r.claims)
			}
			if r.attempts == 1 {
				// Handed back unsent: its claim was no push either.
				noPush, noPushClaims = append(noPush, r.id), append(noPushClaims, r.claims)
			}
		case len(r.retry) > 0:
			retries = append(retries, r)
			if !r.shown && !r.reached {
				// Owed again, and it reached no device: no push yet.
				noPush, noPushClaims = append(noPush, r.id), append(noPushClaims, r.claims)
			}
		case r.shown:
			shown, shownClaims = append(shown, r.id), append(shownClaims, r.claims)
		default:
			// Skipped, or refused by every device: sent to none.
			done, doneClaims = append(done, r.id), append(doneClaims, r.claims)
			noPush, noPushClaims = append(noPush, r.id), append(noPushClaims, r.claims)
		}
	}
	if ends := slices.Concat(done, waiting); len(ends) > 0 {
		// The claims that reached no device are locked first, as a
		// decision locks notifications (newest first), by a statement of
		// their own: the statements that drop what a recall or an edit
		// owed for them (unsentOwedSQL) then read every such job a
		// decision committed before it let go of them, and no decision
		// owes one for them after (it finds them handed back, or gone).
		// Locked in the statement that reads the owed jobs, a remove a
		// decision made while it waited would escape that statement's
		// snapshot, and go out for a notification on no device.
		b.Queue(`SELECT 1 FROM push_job WHERE id = ANY($1) ORDER BY id DESC FOR UPDATE`, ends)
	}
	if len(gone) > 0 {
		// Counted as deleted once committed, and once per device: two
		// pushes in flight to one dead device both answer 410.
		b.Queue(`DELETE FROM push_device WHERE id = ANY($1)`, gone).Exec(func(ct pgconn.CommandTag) error {
			c.deleted = ct.RowsAffected()
			return nil
		})
	}
	if len(noPush) > 0 {
		// A notification's first claim recorded it as the pair's last
		// push (claimSQL); one skipped (not needed by the time it was
		// due), handed back unsent (a stopping node) or sent to no device
		// (every one refused it, or is owed it again: a push service that
		// could not be reached buzzed nothing) was no push: the
		// minimum interval counts from the one before, which is at least
		// that long ago (the claim was due), so the next push of the pair
		// is held back by none. Only while it is still that first claim
		// (the same claim, and one that counted the first attempt; not
		// taken over by a newer one: 'sent') and no earlier claim left
		// devices owed (device_ids): with attempts back at one, that was
		// a send a stopping node cancelled after a device got the push,
		// which the interval counts from.
		b.Queue(`
WITH j AS (
    SELECT p.user_id, p.conversation_id FROM push_job p, unnest($1::bigint[], $2::int[]) AS r(id, claims)
    WHERE p.id = r.id AND p.claims = r.claims AND p.kind = 'message' AND p.attempts = 1 AND p.state = 'sending'
      AND p.device_ids IS NULL
), l AS (
    UPDATE push_last l SET pushed_at = '-infinity'
    FROM j WHERE l.user_id = j.user_id AND l.conversation_id = j.conversation_id
)
UPDATE push_job p SET not_before = now()
FROM j WHERE p.user_id = j.user_id AND p.conversation_id = j.conversation_id
  AND p.kind = 'message' AND p.state = 'pending' AND p.not_before > now()`, noPush, noPushClaims)
	}
	// After noPush, which reads the first claim's device_ids as they were.
	for _, r := range retries {
		uncount := 0
		if r.uncount {
			uncount = 1
		}
		b.Queue(`UPDATE push_job SET device_ids = $2, lease_until = NULL, attempts = attempts - $5,
not_before = now() + make_interval(secs => $3) WHERE id = $1 AND claims = $4 AND state = 'sending'`,
			r.id, r.retry, r.after.Seconds(), r.claims, uncount)
	}
	if len(pushed) > 0 {
		// Before shown, which ends the claims it reads.
		b.Queue(`UPDATE push_last l SET pushed_at = now()
FROM push_job p, unnest($1::bigint[], $2::int[]) AS r(id, claims)
WHERE p.id = r.id AND p.claims = r.claims AND p.kind = 'message' AND p.state = 'sending'
  AND l.user_id = p.user_id AND l.conversation_id = p.conversation_id`, pushed, pushedClaims)
	}
	if len(done) > 0 {
		// A notification sent to no device (in any attempt): the
		// devices show the pair's claimed one before it (unsentOwedSQL).
		b.Queue(`
WITH d AS (
    DELETE FROM push_job p USING unnest($1::bigint[], $2::int[]) AS r(id, claims)
    WHERE p.id = r.id AND p.claims = r.claims AND p.state = 'sending'
    RETURNING p.user_id, p.conversation_id, p.kind, p.sender_id, p.recalled_older, p.edited_older
), w AS (
    SELECT * FROM d WHERE kind = 'message'
), `+unsentOwedSQL+owedCountsSQL, done, doneClaims).QueryRow(func(row pgx.Row) error {
			return row.Scan(&c.unsent.removes, &c.unsent.updates)
		})
	}
	if len(shown) > 0 {
		// The pair's newest sent notification is what its devices show
		// (same tag and collapse key): older sent ones are forgotten (one
		// left by two writers at once is never the newest, which is all
		// a recall looks at).
		b.Queue(`UPDATE push_job p SET state = 'sent', lease_until = NULL, device_ids = NULL
FROM unnest($1::bigint[], $2::int[]) AS r(id, claims)
WHERE p.id = r.id AND p.claims = r.claims AND p.state = 'sending'`, shown, shownClaims)
		b.Queue(`DELETE FROM push_job o USING unnest($1::bigint[], $2::int[]) AS r(id, claims), push_job n
WHERE n.id = r.id AND n.claims = r.claims AND n.state = 'sent'
  AND o.conversation_id = n.conversation_id AND o.user_id = n.user_id
  AND o.kind = 'message' AND o.state = 'sent' AND o.id < n.id`, shown, shownClaims)
	}
	if len(released) > 0 {
		// Only the claims this node still holds: one whose lease ran out
		// while it waited in the queue may be another claim's now, which
		// must keep its lease and count.
		b.Queue(`UPDATE push_job p SET lease_until = NULL, attempts = p.attempts - 1
FROM unnest($1::bigint[], $2::int[]) AS r(id, claims)
WHERE p.id = r.id AND p.claims = r.claims AND p.state = 'sending'`, released, releasedClaims)
	}
	if len(waiting) > 0 {
		// After noPush, which reads them claimed. Still this claim's (as
		// released), each waits again as it did before it (handBack,
		// waitAgainSQL).
		b.Queue(`
WITH w AS (
    SELECT p.id, p.user_id, p.conversation_id, p.seq, p.count, p.covered, p.not_before, p.sender_id, p.recalled_older, p.edited_older
    FROM push_job p, unnest($1::bigint[], $2::int[]) AS r(id, claims)
    WHERE p.id = r.id AND p.claims = r.claims AND p.state = 'sending' AND p.kind = 'message'
    FOR UPDATE OF p
)`+waitAgainSQL, waiting, waitingClaims).QueryRow(func(row pgx.Row) error {
			return row.Scan(&c.back.removes, &c.back.updates)
		})
	}
	return &b
}

// waitAgainSQL ends a statement whose CTE w (id, user_id,
// conversation_id, seq, count, covered, not_before, sender_id,
// recalled_older, edited_older) lists notifications, locked, whose claim sent nothing
// (handBack, takeBackSQL): each waits again as it did before the claim,
// merged into the pair's notification that came to wait meanwhile (one
// pending a pair), which stands for its messages too; the removes and
// updates owed are those of a notification that reached no device
// (unsentOwedSQL). It answers what it decided (owedCountsSQL).
const waitAgainSQL = `, ` + unsentOwedSQL + `, merged AS (
    UPDATE push_job n SET seq = GREATEST(n.seq, w.seq), count = n.count + w.count, covered = n.covered + w.covered,
                          not_before = LEAST(n.not_before, w.not_before)
    FROM w WHERE n.user_id = w.user_id AND n.conversation_id = w.conversation_id AND n.kind = 'message' AND n.state = 'pending'
    RETURNING w.id
), gone AS (
    DELETE FROM push_job p USING merged m WHERE p.id = m.id
), back AS (
    UPDATE push_job p SET state = 'pending', lease_until = NULL, attempts = p.attempts - 1, recalled_older = '{}', edited_older = NULL,
                          unsent_claim = NULL
    FROM w WHERE p.id = w.id AND w.id NOT IN (SELECT id FROM merged)
)` + owedCountsSQL

// unsentOwedSQL is CTEs that, for the notifications w (user_id,
// conversation_id, sender_id, recalled_older, edited_older) whose claim
// reached no device (handed back unsent, skipped, refused by every
// device), leave the pair owing what the devices need: the notification
// the devices show is the pair's claimed one before it. The removes and
// updates the pair owes and no node claimed yet were made for w (a
// notification is not claimed while one is owed, and a recall or an edit
// decided during its claim follows the pair's newest claimed one): they
// go, as nothing of w is on a device (a remove would take the older
// notification off them, an update changes a text they do not show).
// What the older one lost to recalls during the claim (recalled_older,
// recallSQL) is owed a remove instead, and an edit of the message it
// previews (edited_older, updateSQL) an update: it is still shown there.
// The update is sent, as any, only while that notification is the
// pair's newest claimed one and the message is not recalled (readJobSQL).
const unsentOwedSQL = `owed AS (
    DELETE FROM push_job o USING w
    WHERE o.user_id = w.user_id AND o.conversation_id = w.conversation_id
      AND o.kind IN ('remove', 'update') AND o.state = 'pending'
      AND (CASE o.kind WHEN 'update' THEN w.edited_older IS NULL ELSE isempty(w.recalled_older) END)
), owed_older AS (
    UPDATE push_job o SET covered = w.recalled_older, seq = upper(w.recalled_older) - 1, count = 1
    FROM w
    WHERE o.user_id = w.user_id AND o.conversation_id = w.conversation_id
      AND o.kind = 'remove' AND o.state = 'pending' AND NOT isempty(w.recalled_older)
), new_older AS (
    INSERT INTO push_job AS j (user_id, conversation_id, kind, seq, count, sender_id, covered)
    SELECT w.user_id, w.conversation_id, 'remove', upper(w.recalled_older) - 1, 1, w.sender_id, w.recalled_older
    FROM w
    WHERE NOT isempty(w.recalled_older)
      AND NOT EXISTS (SELECT 1 FROM push_job o
                      WHERE o.user_id = w.user_id AND o.conversation_id = w.conversation_id
                        AND o.kind = 'remove' AND o.state = 'pending')
    ON CONFLICT (user_id, conversation_id, kind) WHERE state = 'pending'
    DO UPDATE SET seq = GREATEST(j.seq, EXCLUDED.seq), covered = j.covered + EXCLUDED.covered
    RETURNING 1
), edited AS (
    SELECT w.user_id, w.conversation_id, w.edited_older AS seq,
           COALESCE((SELECT m.sender_id FROM message m
                     WHERE m.conversation_id = w.conversation_id AND m.seq = w.edited_older), w.sender_id) AS sender_id
    FROM w WHERE w.edited_older IS NOT NULL
), owed_edit AS (
    UPDATE push_job o SET seq = e.seq, sender_id = e.sender_id, covered = int8multirange(int8range(e.seq, e.seq + 1))
    FROM edited e
    WHERE o.user_id = e.user_id AND o.conversation_id = e.conversation_id
      AND o.kind = 'update' AND o.state = 'pending'
), new_edit AS (
    INSERT INTO push_job AS j (user_id, conversation_id, kind, seq, count, sender_id, covered)
    SELECT e.user_id, e.conversation_id, 'update', e.seq, 1, e.sender_id, int8multirange(int8range(e.seq, e.seq + 1))
    FROM edited e
    WHERE NOT EXISTS (SELECT 1 FROM push_job o
                      WHERE o.user_id = e.user_id AND o.conversation_id = e.conversation_id
                        AND o.kind = 'update' AND o.state = 'pending')
    ON CONFLICT (user_id, conversation_id, kind) WHERE state = 'pending'
    DO UPDATE SET seq = EXCLUDED.seq, sender_id = EXCLUDED.sender_id, covered = EXCLUDED.covered
    RETURNING 1
)`

// owedCountsSQL ends a statement of unsentOwedSQL's CTEs with the removes
// and the updates it decided (new_older, new_edit: new, or merged into
// one a decision wrote meanwhile), which chat_push_removes_total and
// chat_push_updates_total count as they count the decider's. One it
// turned to the older notification (owed_older, owed_edit) was decided
// for the notification that reached no device, and counted then.
const owedCountsSQL = `
SELECT (SELECT count(*) FROM new_older), (SELECT count(*) FROM new_edit)`

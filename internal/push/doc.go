// Package push wakes devices whose apps are not connected: it decides, from
// the delivered watermark chatd already keeps, which committed messages no
// session of a recipient acknowledged within a delay, and hands one push
// per (user, conversation) burst to Web Push endpoints directly and to the
// operator's FCM/APNs sender (Kafka chat.push and/or a signed webhook). A
// push is only a wake-up: apps sync over their own connection (seq
// catch-up) after it.
//
// # Devices and settings
//
// Devices implements chat.PushStore: push_device rows keyed by (platform,
// token or endpoint), so re-registering updates and another user's
// registration moves the device; at most chat.MaxDevicesPerUser per user
// (the oldest is forgotten; a per-user advisory lock,
// chat_lock_user_devices, keeps the cap under concurrent registrations).
// A revocation of the user's tokens takes the same lock before it forgets
// their devices, and a registration reads the revocation under it: a
// device registered with a token the revocation refuses is either refused
// (ErrTokenRevoked) or committed first and forgotten by it. member_settings holds mute (until a time, or
// until unmuted) and whether mentions still push in a muted group
// (default true); rows go with the member.
//
// # Deciding (one node at a time)
//
// The decider runs on the node holding a PostgreSQL session advisory lock
// (DefaultLockKey, on a dedicated connection, like the outbox relay's
// lease); the others stand by and try it every LeaseInterval. It learns of
// committed messages from the Publisher it is given (Publish: this node's
// commits, and other nodes' through the Kafka consumer), as in-memory
// hints "conversation c is due at t". Hints are only a shortcut: on taking
// the lease and every ReconcileInterval it finds every conversation whose
// push_cursor is behind its last_seq, so a lost hint (a restart, a Kafka
// event missed) costs latency, never a push. Due conversations are decided
// once a Tick, in batches, each one transaction: conversations none of
// whose members has a device are passed over first (passOverSQL: their
// cursors move to last_seq, their entries are not read), the others are
// decided (decideSQL). While no device is registered anywhere, every
// conversation is one to pass over, so the due ones wait and are passed
// over together once a second instead of once a Tick (the decider looks
// for a device, a read, at each tick that has something due, and decides
// as before from the tick that sees one). In a decision, the messages after the
// cursor that are older than Delay are due (other entries of the stream
// at once: they never push); a recipient who is a member since before
// the message, not its sender, and neither acknowledged nor read it, with
// a device, not muted and not a blocker of its sender, gets a job covering every such message so far
// (younger ones waiting with it included: coalescing; push_job.covered
// lists them); the cursor moves past the due entries in the same
// transaction. So a message is decided exactly once, whichever node
// decides, also across a crash: an uncommitted decision is made again, a
// committed one never. A member's removal takes the conversation's
// cursor row too (chat_member_push_forget), so a decision and a removal
// at the same moment leave no job for the removed member whichever goes
// first; the claim's skip of a non-member (not_member) stays as a
// second defence. The send path is not touched: it writes nothing for
// push.
//
// # Recalls
//
// A recall is an entry of the stream too: Publish hints its conversation
// due at once, and the decision that reads it, in the same transaction
// and under the same cursor lock, takes the recalled message out of every
// notification job that covered it (recallSQL): a pending one then
// counts, and previews, only the messages left, or is dropped when none is
// left (dropRecalledSQL). A job that was claimed ('sending') or sent
// ('sent': a notification that reached a device stays until a newer one
// of its (user, conversation) replaces it, as the devices' tag and
// collapse key do) may be on a device (a claim whose send's outcome is
// not known, its node having died mid-send, too; a first claim a
// stopping node handed back before sending it is waiting again:
// pending, and so is one whose lease ran out before its send started,
// once the next claim hands it back): when it is the pair's newest
// claimed one, the user gets a remove job, due at once, also when the
// user has left the conversation since (a member's claimed notifications
// and removes outlive the membership, chat_member_push_forget; a remove
// carries nothing of the conversation). While the pair's newest claimed
// one is in flight, the devices may still show the claimed one before
// it: what that one lost is kept with the claim (recalled_older), and
// the user gets a remove of it if the claim reaches no device (handed
// back unsent, skipped, refused by every device); the removes and
// updates owed for the claim go then. A notification's first claim
// keeps in its covered only the messages it stands for (counts, and
// previews the newest of: not one recalled, acknowledged, or silenced by
// then), also of the older notification it takes over, so a remove names
// only messages the devices' notification counts. Those statements lock
// the conversation's notifications first (newest first, as a claim
// does) and see each as it is when locked: one a sender claimed or took
// over after the decision's snapshot is found claimed, covering what the
// claim left, and a sender that claims a job after the decision reads it
// adjusted.
// Once a message is out of every covered set, handling its recall again
// changes nothing: recalls are handled when read, also before the cursor
// passes them (behind a young message), and exactly once in effect. The
// claim re-checks too (the newest covered message not recalled, and how
// many are left), so a recall the decider has not read yet is neither
// previewed nor counted. It also asks again whether each covered message
// may wake the user (not from a sender they block, the conversation not
// muted: the decision's rule), so a block or a mute made while a push
// waits (the minimum interval, a retry) silences it. A push that waited
// in a node's queue (recheckAfter and longer) is read again the same way
// just before it is sent (recheckSQL): a recall, a read, a block, a mute,
// leaving, or a device deleted or registered by another user meanwhile
// counts; and one whose lease ran out there is not sent (it was claimed
// again: it goes once). Nothing of it was sent, and the claim after it
// knows (push_job.unsent_claim, below): it hands it back first, as a
// stopping node does, so a recall sends no remove for it and the
// minimum interval does not count from it. A remove goes only while a
// notification of its pair may be on a device (claimed, and kept): one
// for a notification that never left the queue has nothing to take
// away.
//
// # Edits
//
// With Preview, a notification shows its newest message's text. An edit
// is hinted due at once too, and read when the cursor passes it (once:
// in the transaction that moves the cursor). A waiting notification
// reads the text when it is claimed, so it previews the edited one and
// needs nothing. Where the pair's newest claimed notification (it may be
// on a device) shows the edited message (its seq, still covered), the
// user gets an update job, due at once (updateSQL, which locks the
// pair's notifications first and so sees one a sender claimed after the
// decision's snapshot as claimed): a silent push carrying the message's
// text as it reads when sent, which devices show in that notification's
// place (same tag; no collapse key: in a push service's store it would
// replace the notification an offline device has not got yet, and hide
// that the message came). It is sent only while that
// notification is still the pair's newest claimed one showing the
// message and the message is not recalled (else skipped as not_shown).
// While the pair's newest claimed one is in flight, the devices may still
// show the claimed one before it: an edit of the message that one
// previews is kept with the claim (edited_older), and the user gets an
// update of it if the claim reaches no device (handed back unsent,
// skipped, refused by every device), sent by the same rule; a claim that
// reaches one replaced it there, and owes none.
// A former member (or one who came back since the message) may not read
// the new text, and their devices must not keep the old one: they get a
// remove of the message instead, as a recall sends. Without Preview, edits are neither hinted
// nor followed: no push showed a text.
//
// A (user, conversation)'s jobs reach its devices in order: none is
// claimed while another of the pair is in flight (leased), and a
// notification waits while a remove or an update of the pair is owed
// (due, or waiting for its retry: a remove sent after it would take it
// away, an update put an older message's text in it). So a remove
// never overtakes the push it removes, nor takes away a newer one. A
// notification waiting for its retry is never sent once a newer one of
// its pair waits (it would replace the newer one on the devices): the
// newer one takes it over when claimed, covering and counting its
// messages too, and the older is kept as sent. What the older one's
// claim owed should it reach no device (recalled_older: removes for the
// notification before it) is the newer claim's then, owed if that one
// reaches none. Its edited_older is not: the older one, kept as sent, is
// the pair's claimed one before the newer claim, so an update of the
// message the one before it previewed would change nothing by the rule
// above.
//
// # Coalescing and the minimum interval
//
// A (user, conversation) has at most one pending job; later decisions merge
// into it (covered grows, seq moves up). A notification's
// push_job.count is the decisions' tally, not what it shows: the
// messages decided into it (and into the jobs it took over or merged
// with), less those recalls took out, at least 1; a first claim narrowing covered, or an
// acknowledgement, leaves it as it is. The count a notification shows is
// read by its claim from covered (the messages left that the user has
// not got, readJobSQL); nothing reads push_job.count to send. The column
// stays: chatd nodes of an older version write it during an upgrade, and
// a removal would fail their decisions. A new job is due at once, or
// MinInterval after the pair's last push that reached a device
// (push_last.pushed_at: recorded by a notification's first claim, and
// forgotten again when that claim reached no device: skipped, handed
// back by a stopping node or by the claim after one whose lease ran out
// before its send started, refused by every device, or owed to them
// again, a push service that could not be reached or answered a retry
// having buzzed nothing; recorded again by a retry that reaches one; a
// claim whose send a stopping node cancelled after a device got it was a
// push, and is not forgotten by the claims after it); push_last.seq
// is the highest seq any job covered, so no message is counted twice.
//
// # Sending (every node)
//
// Every node claims due jobs with FOR UPDATE SKIP LOCKED, setting a lease
// (3 × Timeout + 5 s), into a bounded in-memory queue (QueueSize; due jobs
// beyond it stay in PostgreSQL for this or another node, counted in
// chat_push_queue_overflow_total) served by Workers goroutines. A claim
// PostgreSQL aborts as a deadlock (a notification's first claim locks it
// and then its pair's push_last row; a decision writing a newer one of
// the pair, and reading a recall or an edit, locks them the other way
// round) sent nothing and is made again at once, up to three times, as
// the decision is. The claim
// reads what sending needs in the same round trip: the recipient's
// watermark (acknowledged meanwhile: skipped), the badge (the user's total
// unread messages, chat_unread: edits and reactions are not counted), the
// newest covered message not recalled (none: skipped) and the devices
// owed. A skip is counted in chat_push_skipped_total under what caused
// it: acked, not_member, recalled, blocked (the user blocked the senders
// since), muted, expired (a retry, or a push that waited out the minimum
// interval, whose newest message is older than MaxAge by then),
// no_devices, not_shown (a remove with nothing to take away, an update
// with nothing to change) or gave_up. A job's devices are sent to concurrently:
//
//   - webpush and unifiedpush (to public addresses only unless
//     AllowPrivate: checked on the address dialled, or through a proxy on
//     the endpoint's addresses; not public: the IANA special-purpose
//     ranges that are not globally reachable): RFC 8291 aes128gcm
//     encryption and an RFC 8292
//     VAPID JWT (github.com/SherClockHolmes/webpush-go), POST to the
//     endpoint (RFC 8030) with TTL 24 h, Urgency high and Topic
//     "conv-<id>" (a newer push, a remove too, replaces an undelivered
//     one; an update has none, pushKey);
//   - fcm and apns: a Request (JSON, docs/events.md) to the Kafka topic
//     (key: user id; a missing topic is created with
//     Config.EnsureKafkaTopic, never by the broker) and/or POSTed to the
//     webhook with
//     X-Chat-Signature "t=<unix>,v1=<hex HMAC-SHA256(secret, t.body)>"
//     (Sign, Verify).
//
// 2xx is sent; 404 and 410 delete the device (the webhook's 404 is its
// own URL not found: that push fails); 429, 5xx and network errors
// retry that device only, after the longer of Retry-After (capped at 1 h)
// and exponential backoff with full jitter (BackoffMin..BackoffMax);
// after MaxAttempts a push is dropped (a send a stopping node cancelled
// before any answer is no attempt; one a service answered with a retry
// is, also when the stop came right after the answer, and so counts the
// push's sends cut with it) (chat_push_skipped_total
// {reason="gave_up"}); any other status fails that push for that device,
// for good: also in a claim a stopping node hands back, the next claims
// leave that device out (push_job.refused), as a deleted one.
// With both the Kafka topic and the webhook, a device's push is written to
// Kafka first (a failed write retries it, the webhook not tried) and then
// POSTed: the webhook's answer decides as above, and a retry goes to the
// webhook alone (push_job.kafka_sent: Kafka gets each push once); a push
// Kafka accepted counts as possibly shown (a recall removes it) though the
// webhook refused it, or a stopping node cancelled its webhook send.
// Outcomes are written back in batches by one goroutine, one transaction
// a batch; one PostgreSQL aborts as a deadlock (its statements and a
// decision's lock the same notifications in different orders) is written
// again, as that decision is made again, up to three times. Each outcome
// is written only while its claim still holds the push (the same claim, push_job.claims, which
// every claim moves up and nothing moves back, as a hand-back does
// attempts: one that comes back after its lease ran out leaves another
// node's claim alone, also one that node has handed back). A node that dies
// mid-send leaves its claims to expire: another node (or itself after a
// restart) sends them again, so a push goes out at least once and at most
// once more per crash. A claim that takes a notification waiting names
// itself in it (push_job.unsent_claim) and clears that right before its
// first request goes out (startSQL: one UPDATE, made only while the claim
// still holds it, else nothing is sent; a retry's claims set nothing;
// a mark whose answer is lost, PostgreSQL having committed it, sends
// nothing either, and its worker, which alone knows that, hands the
// claim back as a stopping node does): a
// claim whose lease ran out still named there (it waited in a node's
// queue) sent nothing, and the claim after it hands it back first
// (takeBackSQL, in the claim's transaction), as a stopping node would
// have: a notification waits again, pending, and its first claim is the
// next one; the pair's other jobs are not claimed until then. Any other
// claim (also one made by a chatd that does not name itself) is taken
// for a send whose outcome is not known, as above (so is a claim whose
// mark's answer was lost when its hand-back could not be written either
// before its lease ran out: the database out of reach for that long;
// and one whose mark failed within a lease of a hand-back of the push
// that PostgreSQL's failure caused: a failure that persists, left to
// the lease rather than handed back claim after claim).
// A push service that
// hangs holds one worker for at most Timeout, and one user's pushes are at most UserInFlight of those
// in flight (claimed and leased, by any node: the claim passes over a
// user at the limit, and claims take turns across nodes under an
// advisory lock, so each counts what the others claimed), so a user
// whose devices' push services never answer delays nobody else; sends and
// deliveries never wait for push.
//
// # Payload
//
// Notification: {"type":"message","userId","conversationId","seq","senderId",
// "count","badge","title","body","editSeq"}, body and editSeq only with
// Preview (a message of files alone says what it is: "📷 Photo", ...; a text cut to fit
// ends between two characters as drawn, not inside an emoji sequence or
// before a combining mark), at most
// MaxPayloadBytes (3 KB: inside APNs' and FCM's 4 KB and one Web Push
// record); messages older than MaxAge are never pushed, also by a retry. Remove:
// {"type":"remove","userId","conversationId","seq","seqs","badge"}, seqs the
// recalled messages the notification stood for (the newest that fit),
// seq the newest recalled, to every device of the user, by the same
// routes (the Kafka record's header "notification" says which type).
// Update: {"type":"update","userId","conversationId","seq","editSeq","badge","body"},
// seq the edited message, body its text now (cut as a preview is),
// editSeq the seq of the edit that text is of; a notification previewing
// an edited text carries its editSeq too. Updates have no collapse key,
// so a push service may deliver two of them out of order: a device shows
// an update's text only over a text of an older edit (docs/events.md).
//
// # Concurrency and lifecycle
//
// New builds a Pusher; Publish is safe for concurrent use and never blocks
// (a map insert under a mutex, on the commit path). Run owns everything
// else (the decider, the claimer, the workers and the result writer), may
// be called once, and returns when its context is cancelled, after
// cancelling sends in flight (their devices are owed again, and the
// cancelled send does not count as an attempt unless another device's
// service answered it with a retry; a send none of whose requests went
// out yet, a connection still being opened: net/http/httptrace's
// WroteRequest never came, no Kafka write tried, is handed back as a
// queued claim is, its send not started), handing
// back the queued claims it still holds (one whose lease ran out in the
// queue may be another node's claim now: it is left alone; a
// notification's first claim waits again, pending, merged into the one
// of its pair that came to wait meanwhile: nothing of it reached a
// device, so a recall sends no remove for it, and the removes and
// updates a recall or an edit decided during the claim owed for it are
// dropped) and writing the last outcomes. Devices is safe for
// concurrent use.
//
// # Metrics
//
// chat_push_decider_leader, chat_push_queue_length,
// chat_push_decided_total, chat_push_removes_total, chat_push_updates_total,
// chat_push_queue_overflow_total,
// chat_push_devices_deleted_total, chat_push_sent_total{platform,result},
// chat_push_skipped_total{reason}, chat_push_errors_total{kind},
// chat_push_latency_seconds (commit of the newest message to acceptance)
// and chat_push_decide_seconds. What a transaction wrote (decided jobs,
// removes and updates owed, devices deleted) is counted once it
// committed, by the node that ran it: one whose COMMIT's answer was lost
// with the connection is asked about by its id (pg_xact_status, inTx), so
// it counts once when it committed, none when it did not, and none when
// PostgreSQL cannot tell within 5 s (an undercount, never a double
// count: such a transaction is never run again). A claim found so
// committed sends the jobs it read at once, instead of leaving them to
// wait out their lease, and counts the one attempt each sends, as any
// claim does. A queued push's re-read (recheckSQL, which renews its
// lease; one statement, no transaction id to ask about) whose answer was
// lost is run again, up to 3 times: while the claim holds the push it
// answers what the lost run did, so the push goes at once, not after its
// lease; 3 failing, the worker, which alone knows nothing went out,
// hands the claim back, as a stopping node does, once a lease: a push
// whose re-reads fail again within a lease of that (a failure that
// persists, PostgreSQL too slow to answer them) waits out its lease, as
// a claim whose node died, so it is not claimed and handed back over and
// over, its attempt given back each time. A result batch that did not commit (its connection died before
// the COMMIT, or PostgreSQL says it aborted) is written again, up to 3
// times: left unwritten, its pushes would be sent again after their
// lease. One that may have committed (PostgreSQL cannot tell,
// errMayHaveCommitted) is not: written twice, a hand-back would give
// back two attempts; its pushes go again after their lease, as after a
// crash. A decision whose answer was lost ends the decider's session
// (the lease's connection): the lease is taken again, by this node or
// another, once PostgreSQL ended that session (within ~25 s when the
// network failed), and the decisions after it are that much late.
package push

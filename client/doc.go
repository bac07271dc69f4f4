// Package client is a Go client for chatd over MQTT (paho.golang autopaho,
// MQTT v5, TCP or WebSocket). It implements the client side of
// docs/protocol.md so that an application gets the server's guarantees
// without re-implementing them:
//
//	c, err := client.New(ctx, client.Config{
//		Brokers:    []string{"mqtt://127.0.0.1:1883"},
//		UserID:     1,
//		Token:      token, // `chatctl token --user 1`
//		SessionDir: "/var/lib/myapp/chat-session",
//	})
//	defer c.Close(context.Background())
//	seq, err := c.Send(ctx, conversationID, "hello")
//	for ev := range c.Events() { ... }
//
// # Connection and session
//
// New connects in the background and reconnects with exponential backoff
// until Close; AwaitConnection waits for a connection (and explains the
// last failure). A CONNECT chatd refuses as "later" with a retryAfter
// (CONNACK 0x9F: a connect rate limit, or the node's connect budget full)
// is tried again no sooner than that, plus up to a second of jitter, even
// beyond MaxReconnectDelay (chatd asks for at most a minute). The one exception is a static Config.Token that chatd
// refuses (CONNACK 0x86/0x87: bad, expired or revoked), as it does once
// the token expires: it would be refused every time, so the client stops
// connecting, Err reports an *Error matching ErrUnauthorized, Events
// carries an error event with code "unauthorized", and requests and sends
// fail with it (unsent changes stay in SessionDir). Use TokenFunc to renew
// tokens instead: a refused token is then retried with the next one, and
// AwaitConnection, when its context ends, reports the refusal (an error
// matching ErrUnauthorized). A ClientID chatd refuses (CONNACK 0x85:
// another user's session holds it, or it is longer than 256 bytes) stops
// the client the same way, with a TokenFunc too, as an *Error matching
// ErrClientIDRejected (an error event with code "client_id_rejected").
// CONNACK 0x88 (chatd could not check the token now: its
// database, or an identity provider's signing keys, unavailable) is no
// refusal: the client keeps trying. Two clients given one ClientID (a
// SessionDir is locked against that) take the session from each other:
// chatd ends the older connection with DISCONNECT 0x8E, and the client
// taken over would take it back at once, for ever. A client taken over 3
// times within a minute therefore stops connecting, as for a refused
// token, with ErrTakenOver (code "taken_over") and an error event of that
// code; the other goes on. With SessionDir or ClientID the session is persistent (clean
// start 0, session expiry Config.SessionExpiry): chatd keeps the delivery
// cursor and replays what was missed. On every connection the client
// subscribes again to chat/v1/user/{uid}/events and to its RPC reply topic
// chat/v1/user/{uid}/rpc/{clientID}.
//
// # Sending: acked means committed, exactly once
//
// Send records the message (clientMsgId, conversation, body) in
// SessionDir/pending.jsonl, fsynced, before publishing it at QoS 1, and
// removes it when chatd's PUBACK settles it. Until then it is re-published
// with the same clientMsgId: after a reconnect, while chatd answers 0x80
// "unavailable", and by the next client opened on the same SessionDir after
// a crash or restart. chatd de-duplicates by clientMsgId, so the message is
// stored once. The client asks for MQTT 5 problem information in its
// CONNECT, so that PUBACKs carry the seq; should a success PUBACK still
// lack it, the message counts as committed and its seq is resolved by
// re-publishing the clientMsgId (a duplicate is answered with the original
// seq) or from history before Send returns and the journal forgets it. The journal exists because paho's own session store (also
// kept in SessionDir) is wiped whenever the server answers "no session
// present", as chatd does after its own restart.
//
// Refusals are *Error values whose Code is the PUBACK's code property
// (without one, taken from the reason code: 0x87 not_member, 0x99
// invalid, 0x97 rate_limited), matching the sentinel of its class: 0x87
// ErrNotMember, ErrForbidden, ErrNotFound, ErrGone or ErrBlocked; 0x99
// ErrInvalid (too_large, unsupported, conflict and too_many_reactions
// too); 0x97 ErrRateLimited or ErrMemberCap. They are final, with one
// exception: chatd answers 0x97 to a re-publish while the sender's
// bucket is empty, whether or not an earlier publish committed it, so a
// change whose
// earlier publish may have committed (no PUBACK came, or one without the
// seq) is re-published later on 0x97 until chatd settles it (with the
// original seq if it had committed). A send or request larger than the
// Maximum Packet Size of chatd's CONNACK (164 KiB with chatd's default
// body limit: a body within that limit always fits) is refused by the
// client itself, unpublished (code too_large, ErrInvalid): MQTT 5
// forbids sending it, and chatd would drop the connection; so is
// one too large for a line of the journal (16 MiB), before it is recorded
// (the next client on that SessionDir could not read it back). A
// message queued when Send's context ends keeps being sent in the
// background (ErrQueued).
// A re-published message whose first PUBACK was lost, and which was
// recalled in between (from another device, say), is answered by chatd
// as a duplicate of a recalled message: Send still returns its seq (it
// did commit; do not send it again), and Commit, which returns an
// Outcome, says Recalled, so that an application does not show it as
// sent (the message.recalled event tells it too). The same holds for an
// edit of a message recalled since.
// Recovered messages from a previous run report nothing to a caller: the
// application sees them as its own message.new events (same ClientMsgID).
// A change refused for good that no caller got the refusal of (recovered
// from SessionDir, or its Send's context ended: ErrQueued) is told on
// Events instead, as an error event with its ConversationID, ClientMsgID
// and the refusal's Code and Message; it is no longer pending.
//
// A conversation's sends (and edits, recalls, reactions) are stored in the
// order they were queued: each is published once the one queued before it
// in that conversation settled (committed or refused), in this run or
// from the journal after a restart. Messages typed offline therefore
// arrive as they were typed, at one round trip each when the connection
// returns; sends to different conversations go out side by side.
//
// # Events: in order, each message once
//
// Events delivers message.new per conversation in seq order, each
// (conversationId, seq) once. The client keeps "have", the highest seq it
// handed on per conversation: from Config.Positions, or else from the first
// event of a conversation it sees. A conversation its user joined live
// (conversation.created listing them, at seq 0; their member.added, at
// its seq) of which no entry came before a connection without a server
// session (Ephemeral) was lost starts at that join: the catch-up fills
// what was written meanwhile, before the first live entry (a persistent
// session has it replayed). So does one joined while such a connection
// was down, which no conversation.created or member.added told: the
// catch-up's inbox read, made on every connection without a server
// session, lists it for the first time (each read is compared with the
// one before it in this run), and says where the membership starts
// (InboxEntry.JoinSeq): no history read looks for it. One that a read
// lists and no entry of which has come (an empty group, a direct
// conversation the other side opened, any the first read of the run
// lists) is the user's after its lastSeq at that read: its first entry
// starts it, as on a new session, and should such a connection be lost
// before one comes, the catch-up fills from there (what was written
// meanwhile is handed on, nothing from before the read); removed live
// before one came, the user left it at that seq. A duplicate (seq <=
// have) is dropped; a
// gap (seq > have+1) is filled through history (RPC, afterSeq=have, sent
// explicitly also when it is 0) before the event is handed on. A failing
// history call is retried with backoff until the gap is filled or the
// client closes: later events of any conversation wait. Only a refusal for
// good (no longer a member) drops the event after the gap. A client that
// stopped connecting (Err) gives the fill up: the entries of that
// conversation from the gap on are not handed on (Positions says where
// the next client goes on from), the other events are, its error event
// among them. Entries the
// user may not read are not a gap: in a group whose history is "joined",
// a member removed and added again (while offline, say) reads only what
// came after the new join, and the client goes on from there.
//
// After every (re)connection the client compares each tracked
// conversation's inbox lastSeq with have, which covers anything missed
// while offline. Without a server session (Ephemeral) it fills the
// difference through history at once. On a persistent session chatd
// replays the missed messages itself, so the client waits for that: it
// fills a conversation still behind its inbox lastSeq only once no event
// of it has arrived for 1.5 s and the whole stream has been quiet as long
// (or 5 s have passed since the reconnection), as when chatd has no
// cursor for a brand-new session. A tracked conversation the whole inbox
// no longer lists (the user left or was removed while offline;
// member.removed is not replayed) is dropped from Positions, as a live
// member.removed drops it; what the leave still owed, which chatd may go
// on sending after either (entries committed before it that had not
// reached the connection), is handed on without bringing it back (the
// user's member.added does, from its next entry on, as chatd's stream
// goes on after a re-add). chatd may drop that member.added, as any live
// event: a session whose queue of live events overflowed (its client
// read too slowly) drops them and catches the entries up from
// PostgreSQL, so the entries of the new membership come and the event
// does not. Its entry does (system.new, action member.added, naming the
// user): the first of the new membership, it brings the conversation
// back as the event would. The leave's seq does that already after a live
// member.removed (below), and a conversation the user was not in before
// in this run starts at its first entry anyway, so it matters where the
// catch-up found the user gone, and there only once chatd confirms
// (conversation.get: joinSeq, the seq before the entry) that the entry
// starts the user's current membership: a persistent session offline
// while the user was added back and removed again replays that
// membership's entries, its member.added entry first, and may do so
// after the catch-up found the user gone; such an entry is handed on
// without bringing the conversation back. While chatd is asked, the
// entry and the events of its conversation that come after it wait, and
// follow the answer in the order they came, but typing (which is of
// now), and read.updated and delivery.updated that name a seq the
// application has (below the join entry's, or at most the highest seq
// of the user's own changes that Send, Apply or Commit returned there in
// this run), which go on at once; one naming a seq it has not been
// handed follows that entry, as docs/protocol.md promises a receipt does;
// the other conversations' events go on meanwhile (Close ends the question, and what it held is
// not handed on). chatd is asked 3 times at most (each up to
// RequestTimeout), and not once the client stopped connecting (Err),
// which ends a question under way: what it held is handed on before the
// error event, as if no answer had come, so that nothing that came
// before the stop follows that event; without
// an answer the entry brings the conversation back: one tracked wrongly
// is forgotten by the next inbox read (of the next connection, or of the
// next client given Positions), while one left untracked wrongly would have its
// entries handed on without filling what was lost on the way, and stay
// out of Positions, until a reconnection's inbox read. Added back while offline, with no member.added
// (it is not replayed), the user has the conversation brought back by an
// inbox that lists it again, or by an entry past the seq of the
// member.removed (what a persistent session replays of the new
// membership; a member.removed without a seq is at 0, which chatd
// omits), at its position at the leave (if none of its entries had
// come: its join, 0 for a group created with the user, or the lastSeq an
// inbox read listed it at): what followed the new join
// is caught up as for any tracked conversation (and, in a group whose
// history is "all", what was written while the user was away comes too,
// from history, before the entries after it). An inbox read lists every
// conversation: a conversation written to while the pages are read moves
// ahead of those read and is on no later page, so after the last page the
// client reads the first page again, which holds all that moved once it
// also lists a conversation that did not (one more page for an inbox of
// more than 200 conversations; after 5 passes the read fails and is
// tried again, since a conversation it missed would be taken for one
// left or joined while offline).
// A live member.removed or member.added of the user that arrives while
// the inbox is read is newer than the read: the read does not undo it.
// Messages fetched through history have
// FromHistory set. Large-group message.new events
// without a body are completed through history too; what a removal still
// owes (handed on after member.removed) chatd sends with its body. Other events
// (read.updated, member.*, typing, error) are passed through unchanged;
// they are live notifications that the server does not replay. Persist
// Positions (or the last Seq per conversation you processed) and pass it
// back as Config.Positions to resume exactly after a restart: an event is
// in Positions by the time Events carries it, and after Close Positions
// covers exactly what Events carried.
//
// # Read receipts
//
// MarkRead is debounced: within Config.ReadDebounce (1s) only the highest
// seq per conversation is published, once (chat/v1/conv/{cid}/read, QoS 1).
// Flush publishes at once; Close flushes when connected. A receipt chatd
// refuses for now (its read receipt rate limit, or unavailable) is kept
// and published again no sooner than its retryAfter (Flush returns the
// refusal); one refused for good (not a member) is dropped. MarkReadNow
// publishes through RPC and returns the new watermark.
//
// # Requests
//
// Inbox, History, Conversation, CreateGroup, OpenDirect, AddMember,
// RemoveMember, SeenBy, MarkReadNow, the people and group operations
// (Me, User, Presence, Block, UpdateGroup, Search, ...),
// SetConversationSettings (mute) and the push devices (RegisterDevice,
// Devices, DeleteDevice, VAPIDPublicKey) use MQTT v5 request/response
// (chat/v1/rpc/{method}, Response Topic and Correlation Data;
// docs/http.md lists the methods). They wait for a connection within
// their context (Config.RequestTimeout when it has no deadline). chatd
// replies only on the connection that asked, so a
// request whose connection drops before its reply gets none: reads, and
// the writes chatd answers as the first when repeated (CreateGroup and an
// upload's ticket, which carry a key of their own, an upload's
// completion, the group's membership, role, ownership and
// settings changes, blocks), are then asked again on the next connection; other
// writes are not (they may have run) and fail at once with an error
// matching ErrUnavailable, without waiting for the timeout. The
// exceptions: DeleteDevice is asked again (the 404 of a repeated deletion
// means the device is gone; device ids are never reused), and RevokeTokens
// asks again only if the next connection tells that its revocation did
// not happen.
// Refusals are *Error values with the HTTP API's code and status. A
// request chatd refuses for now (rate_limited, or unavailable: busy
// request workers, a database outage) is not asked again by itself, reads
// (History, Inbox, Search, ...) included: the caller decides, and
// Error.RetryAfter says when chatd expects the retry to succeed (the
// reply's error.retryAfter; a refused publish's retryAfter property). A
// rate limit is chatd asking the caller to slow down: an application
// that shows it, or drops a read the user no longer waits for, should
// learn of it at once, not after a wait the client chose inside its
// context; and a caller asking again soon gets the refusal again (its
// retryAfter is when a token is back). The client waits out a
// retryAfter itself only for what it has taken on to finish: sends
// (journaled, stored exactly once), the history and inbox reads of gap
// fills and catch-ups, and Upload and Download, each one operation of
// several requests that a refused step would otherwise restart ("Retry
// later").
//
// # Retry later
//
// The operations that retry by themselves, Upload (its ticket, its PUT,
// its completion) and Download, wait after a 429 or 503 what the answer
// says: its body's error.retryAfter, else its Retry-After header (whole
// seconds or an HTTP date, as a proxy or object store in front of chatd
// may send), at least their own backoff, at most 5 minutes, plus up to a
// second of jitter so that clients told the same second do not all come
// back in the same instant; the same rule as a refused CONNECT's
// retryAfter. Download asks again after a 429 as after a 503 (a GET is
// safe to repeat). A refusal with a longer delay (an upload's ticket
// refused for the day's upload bytes used up: until midnight UTC; a proxy
// or object store asking for an hour) is returned at once, with its
// Error.RetryAfter, as is one whose delay would outlast the context:
// whether it is the ticket, the PUT, the completion, the upload's
// read-back or a Download's GET that was refused. The context ends a
// wait at once. The retries in the background follow the same rule: a
// send chatd refused for now (PUBACK 0x80, or 0x97 for a re-publish of a
// message that may be committed) is published again no sooner than its
// retryAfter, and the history and inbox reads that fill gaps and catch
// up wait the retryAfter of a refusal. An HTTP answer without chatd's
// JSON error (a proxy's or a load balancer's page) is typed by its
// status as chatd's own would be: 401 unauthorized, 403 forbidden, 404
// not_found, 413 too_large, 415 unsupported, 429 rate_limited, 408 and
// 5xx unavailable, any other 4xx invalid; only unavailable and
// rate_limited are sent again. An object store's answer to an upload's
// PUT: 403 and S3's ExpiredToken (its signing credentials ran out) gone
// (a new ticket), 429 rate_limited, 408, 5xx and S3's
// RequestTimeout (answered 400 to bytes that came too slowly)
// unavailable, any other 4xx invalid. A file whose size the server does
// not say where a resumed Download needs it is ErrInvalid, at once.
//
// # Attachments
//
// Upload sends a file for a conversation (a ticket over RPC upload.create,
// the bytes over HTTP to chatd, Config.HTTPURL, or straight to the object
// store, then upload.complete) and returns the Attachment a message will
// carry. The file's type, unless UploadOptions.ContentType declares it,
// is its extension's (the client's own table for the types chatd accepts
// that Go's mime package may not know without the system's tables, such
// as .heic, .heif or .7z; then the mime package), else (no extension,
// an unknown one, or one of application/octet-stream) its first bytes',
// named by chatd's own sniffer: IMG_0001 holding a HEIC is image/heic.
// The ticket request carries a key of its own, so one whose reply was
// lost with its connection is asked again and answers the same upload,
// charged once against the day's bytes and the upload rate.
// A PUT cut short is sent again from the start, re-reading the file
// (a one-shot reader is spooled to a temporary file first). A PUT answered
// 409 (complete already: an earlier one got through, its answer was lost)
// is a success: the upload is read back, retried like a PUT. So is one
// answered 410 (its URL expired, which chatd answers whatever became of
// the upload), and a retry due as the URL is about to expire: the upload
// is read (upload.get) before a new ticket is asked for. Complete with
// the file (its size, of the type declared or, sniffed, one of its kind),
// it is returned as the lost answer would have been; still pending (the
// bytes never arrived), a new ticket takes the file on the next attempt
// (none is taken on the last, UploadOptions.Attempts: chatd charges a
// ticket as it is taken, and Upload fails instead); sent already or in
// use as an avatar (ErrInvalid), recalled or released (ErrGone), Upload
// fails saying so rather than upload the file a second time; its error
// says what became of the upload and why it was read (its URL expired,
// or bytes sent before with their answer lost). With an object store,
// the completion whose reply was lost with its connection is asked again
// on the next, within the same attempt (chatd answers it the same when
// repeated), and a PUT that sent every byte (the store's answer lost, or
// the completion's for good) is followed by the completion alone
// (upload.complete, which chatd answers after the URL expired too), not
// by the bytes again: chatd learns of them from it only, and upload.get
// says pending whatever the bucket holds. A completion that finds the
// upload gone (deleted after upload_ttl, which a node configured with a
// shorter one than the ticket's URL life passes while the URL still
// takes bytes) has nothing to complete them into: a new
// ticket takes them, once, not that URL again; deleted again (or with
// no attempt left, UploadOptions.Attempts, when no ticket is taken),
// Upload fails with an error matching ErrNotFound that says so. Only a
// completion that finds
// nothing under the URL (the upload still pending) sends them again; one
// that finds nothing though the store answered the PUT 2xx (a store that
// shows an object late) is asked again on the next attempt, before the
// bytes go again, rather than fail the Upload; one that finds nothing
// because another completion of them took them (the first, still
// running on another node when the one sent again arrived) returns the
// upload complete with the file. A completion that fails for now (chatd
// out of reach for the request's time, or unable) is sent again on the
// next attempt, within Attempts, rather than fail the Upload. Send it with
// SendMessage and SendOptions.Attachments (it rides the journal like any
// message). Events and history carry MsgType and Attachments. Download and
// DownloadThumbnail fetch one (following an object store's redirect);
// a broken connection is resumed with a Range request from where it
// stopped, and DownloadFrom resumes a file a previous run began. Close
// ends an Upload or a Download under way: it returns ErrClosed and sends
// or fetches nothing more.
//
// UploadAvatar uploads a picture (JPEG, PNG, GIF or WebP) for an avatar:
// name it once as ProfileUpdate.AvatarUploadID or
// GroupUpdate.AvatarUploadID. A Profile's or Conversation's Avatar is
// then its path, /v1/attachments/{id}, which DownloadAvatar fetches (with
// the token: who may see the profile, or the group's members); otherwise
// it is an https URL or nil.
//
// # Concurrency
//
// All methods are safe for concurrent use. Events are produced by one
// goroutine: read the channel promptly, since events arriving meanwhile are
// buffered in memory without bound (they are acknowledged to chatd on
// arrival; the position logic above, not the server's cursor, is what makes
// a restart resume exactly). Close does not need Events to be drained; it
// closes the channel once the client has stopped. After Close every method
// returns ErrClosed. One SessionDir may be used by one client at a time (it
// is locked).
//
// # Server versions
//
// Use this package with a chatd built from the same release or a newer
// one. chatd refuses request fields it does not know (a typo must not
// pass as an absent field), and this client sends what its release's
// chatd takes: CreateGroup and Upload, for instance, send a clientMsgId
// of their own, which a chatd from before group-create and upload-ticket
// keys refuses as invalid. Upgrade chatd first, then the apps.
package client

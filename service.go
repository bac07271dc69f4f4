package chat

import (
	"context"
	"encoding/base64"
	"errors"
	"fmt"
	"math"
	"strconv"
	"strings"
	"sync"
	"time"
	"unicode/utf8"
)

// Service is the one entry point transports use: it validates input,
// applies the rate limits and calls the Store. It never publishes: the
// Store publishes what each write committed (chat.Publisher).
//
// The optional fields are set once, before the Service is used:
//   - Limiter and Rates enforce the rate limits (nil Limiter: none), so MQTT,
//     HTTP and RPC share one budget per user and conversation;
//   - Receipts, when set, takes the read receipts instead of Store.MarkRead
//     (a group-committing writer that also notifies the events itself);
//   - PresenceSource answers presence queries (nil: not available);
//   - Attachments handles uploads and downloads (nil: not enabled).
//   - Push keeps push devices and member settings (nil: not available).
type Service struct {
	Store  Store
	Limits Limits

	Limiter        RateLimiter
	Rates          RateLimits
	Receipts       ReceiptWriter
	PresenceSource PresenceSource
	// LargeGroup: conversations above this many members get no profile
	// pushes (0: DefaultLargeGroup), as they get no presence pushes.
	LargeGroup int
	// Attachments handles uploads and downloads (nil: not enabled).
	Attachments Attachments
	// Push keeps devices and member settings (nil: push not available).
	Push PushStore

	typing  typingThrottle
	revoked revokedTokens
}

// RateKind names a rate limit; it labels metrics and keys the buckets.
type RateKind string

// The rate limits. Send and Conv are charged by Send (per sender, per
// conversation), Read by MarkRead, Typing by the MQTT typing topic, API by
// every HTTP request and RPC call, Connect by every MQTT CONNECT (per IP),
// ConnectUser by every MQTT CONNECT whose token is valid (per user).
const (
	RateSend        RateKind = "send"
	RateConv        RateKind = "conv"
	RateRead        RateKind = "read"
	RateTyping      RateKind = "typing"
	RateAPI         RateKind = "api"
	RateConnect     RateKind = "connect"
	RateConnectUser RateKind = "connect_user"
	// RateUpload is charged by every upload ticket (CreateUpload).
	RateUpload RateKind = "upload"
)

// RateLimit is a token bucket: Burst tokens at most, refilled at Rate per
// second. A Rate of 0 (or less) means unlimited.
type RateLimit struct {
	Rate  float64
	Burst int
}

// Enabled reports whether the limit applies at all.
func (l RateLimit) Enabled() bool { return l.Rate > 0 && l.Burst > 0 }

// RateLimits are the configured limits, by kind.
type RateLimits struct {
	Send, Conv, Read, Typing, API, Connect, ConnectUser RateLimit
	Upload                                              RateLimit
}

// For returns the limit of kind.
func (r RateLimits) For(kind RateKind) RateLimit {
	switch kind {
	case RateSend:
		return r.Send
	case RateConv:
		return r.Conv
	case RateRead:
		return r.Read
	case RateTyping:
		return r.Typing
	case RateAPI:
		return r.API
	case RateConnectUser:
		return r.ConnectUser
	case RateConnect:
		return r.Connect
	case RateUpload:
		return r.Upload
	}
	return RateLimit{}
}

// RateDecision is what a RateLimiter answered for one token.
type RateDecision struct {
	Allowed    bool
	Limit      int           // bucket size
	Remaining  int           // whole tokens left after this call
	RetryAfter time.Duration // refused: until one token is available
	Reset      time.Duration // until the bucket is full again
}

// RateLimiter takes tokens from token buckets named by kind and key.
// Implementations never fail: when their shared store is unreachable they
// decide locally. Take and Refund must be safe for concurrent use.
type RateLimiter interface {
	Take(ctx context.Context, kind RateKind, key string, l RateLimit) RateDecision
	// Refund puts one token back (a duplicate resend, a send that did not
	// commit), never above the burst.
	Refund(ctx context.Context, kind RateKind, key string, l RateLimit)
}

// ReceiptWriter applies read receipts in batches. MarkRead returns after the
// receipt committed, with the same result as Store.MarkRead; the writer
// notifies read.updated itself, once per batch and watermark.
type ReceiptWriter interface {
	MarkRead(ctx context.Context, conversationID, userID, seq int64) (ReadResult, error)
	// Pending reports whether a receipt of userID for conversationID waits
	// for the next batch: another one merges into it and costs no write.
	Pending(conversationID, userID int64) bool
}

// Presence is a user's online state. LastSeen is when the user was last
// connected (now while online), nil when never seen.
type Presence struct {
	UserID   int64      `json:"userId"`
	Online   bool       `json:"online"`
	LastSeen *time.Time `json:"lastSeen"`
	// Hidden: the user hides their presence, or the caller hides theirs
	// (reciprocal), or the user blocked the caller; Online is then false
	// and LastSeen null.
	Hidden bool `json:"hidden,omitempty"`
}

// PresenceSource answers presence queries.
type PresenceSource interface {
	Presence(ctx context.Context, userID int64) (Presence, error)
	// SharesConversation reports whether a and b are members of one
	// conversation.
	SharesConversation(ctx context.Context, a, b int64) (bool, error)
}

// PresenceNotifier is implemented by a PresenceSource that tells the
// users concerned when who may see a user's presence changed while no
// connection did: the user's presence setting, or a block of theirs.
// Without it, a contact told "online" would show the user online until
// they asked again: the user's later disconnect is not announced to whom
// may no longer see it.
type PresenceNotifier interface {
	// PresenceVisibilityChanged: userID's presence is now hidden from
	// users who may have seen it (hidden), or visible to users who could
	// not see it. It never blocks.
	PresenceVisibilityChanged(userID int64, hidden bool)
}

// presenceVisibilityChanged tells the PresenceSource, when it is a
// PresenceNotifier, that userID's presence was hidden from some users or
// shown to them again.
func (s *Service) presenceVisibilityChanged(userID int64, hidden bool) {
	if n, ok := s.PresenceSource.(PresenceNotifier); ok {
		n.PresenceVisibilityChanged(userID, hidden)
	}
}

// HistoryPage is a page of history with the other members' lowest
// delivered and read watermarks (see InboxEntry), so a client can show
// sent, delivered and read for each of its own messages.
type HistoryPage struct {
	Messages     []Message `json:"messages"`
	DeliveredSeq int64     `json:"deliveredSeq"`
	ReadSeq      int64     `json:"readSeq"`
}

// HistoryPager is implemented by stores that read a history page and the
// watermarks in one snapshot.
type HistoryPager interface {
	HistoryPage(ctx context.Context, q HistoryQuery) (HistoryPage, error)
}

// DeliveryEvent builds delivery.updated: userID's delivered watermark in
// the conversation moved to seq.
func DeliveryEvent(conversationID, userID, seq int64) Event {
	return Event{Type: EventDeliveryUpdated, ConversationID: conversationID, UserID: userID, Seq: seq}
}

// PresenceEvent builds presence for p; a Hidden p says only that.
func PresenceEvent(p Presence) Event {
	online := p.Online && !p.Hidden
	ev := Event{Type: EventPresence, UserID: p.UserID, Online: &online, Hidden: p.Hidden}
	if p.LastSeen != nil && !p.Hidden {
		at := p.LastSeen.UTC()
		ev.LastSeen = &at
	}
	return ev
}

var rateWhat = map[RateKind]string{
	RateSend:        "messages per second per user",
	RateConv:        "messages per second in this conversation",
	RateRead:        "read receipts per second",
	RateTyping:      "typing events per second",
	RateAPI:         "requests per second",
	RateConnect:     "connections per second from this address",
	RateConnectUser: "connections per second per user",
	RateUpload:      "uploads per second per user",
}

// take charges one token of kind for key; nil when allowed or unlimited.
func (s *Service) take(ctx context.Context, kind RateKind, key string) error {
	l := s.Rates.For(kind)
	if s.Limiter == nil || !l.Enabled() {
		return nil
	}
	d := s.Limiter.Take(ctx, kind, key, l)
	if d.Allowed {
		return nil
	}
	retry := max(d.RetryAfter, time.Millisecond)
	return &Error{
		Code:    CodeRateLimited,
		Message: fmt.Sprintf("rate limited: at most %s %s (burst %d); %s", formatRate(l.Rate), rateWhat[kind], l.Burst, retryText(retry)),
		RateLimit: &RateLimitInfo{Kind: kind, Limit: d.Limit, Remaining: d.Remaining,
			RetryAfter: retry, Reset: d.Reset},
	}
}

func (s *Service) refund(ctx context.Context, kind RateKind, key string) {
	if l := s.Rates.For(kind); s.Limiter != nil && l.Enabled() {
		s.Limiter.Refund(ctx, kind, key, l)
	}
}

func formatRate(r float64) string {
	if r == math.Trunc(r) {
		return strconv.FormatFloat(r, 'f', 0, 64)
	}
	return strconv.FormatFloat(r, 'f', -1, 64)
}

// CheckRate charges one token of kind for key (a user id, an IP address)
// and returns a rate_limited error carrying RateLimitInfo when the bucket
// is empty. Transports use it for the limits the Service does not apply
// itself: typing, API calls and connects.
func (s *Service) CheckRate(ctx context.Context, kind RateKind, key string) error {
	return s.take(ctx, kind, key)
}

// UserKey is the rate-limit key of a user.
func UserKey(userID int64) string { return strconv.FormatInt(userID, 10) }

// NewService wires a Store with limits (zero = defaults).
func NewService(st Store, l Limits) *Service {
	return &Service{Store: st, Limits: l.withDefaults()}
}

// Send validates, charges the sender's and the conversation's send limits
// and commits a message (the Store publishes message.new; a duplicate
// publishes nothing: its event went out with the original).
//
// Nothing over a limit reaches the store. A duplicate resend (same
// clientMsgId, same sender) is charged and then refunded once the store
// recognised it, so a resend under the limit costs nothing; a resend that
// arrives while the bucket is empty is refused like any other send and
// answered as a duplicate when retried. A send that failed as unavailable
// or internal is refunded too: the client resends it. Edits, recalls and
// reactions follow the same rules (Change).
func (s *Service) Send(ctx context.Context, req SendRequest) (SendResult, error) {
	c := req.Change()
	if err := s.admit(ctx, &c); err != nil {
		return SendResult{}, err
	}
	req.ClientMsgID = c.ClientMsgID
	res, err := s.Store.Send(ctx, req)
	s.settle(ctx, c, res.Duplicate, err)
	if err != nil {
		return SendResult{}, err
	}
	return res, nil
}

// SubmitSend is Send for callers that must not wait: validation and the
// rate limits are applied before it returns (done may be called before it
// returns, with their error); the commit's outcome comes to done later, from
// another goroutine. Sends submitted one after another commit in that order
// within their conversation. done must not block.
func (s *Service) SubmitSend(ctx context.Context, req SendRequest, done func(SendResult, error)) {
	c := req.Change()
	if err := s.admit(ctx, &c); err != nil {
		done(SendResult{}, err)
		return
	}
	req.ClientMsgID = c.ClientMsgID
	s.Store.SubmitSend(ctx, req, func(res SendResult, err error) {
		s.settle(ctx, c, res.Duplicate, err)
		if err != nil {
			res = SendResult{}
		}
		done(res, err)
	})
}

// Edit replaces a message's body: only its sender, within the edit window,
// not once recalled; the new body obeys the send rules. Editing to the
// current body is still an edit (an entry).
func (s *Service) Edit(ctx context.Context, r EditRequest) (ChangeResult, error) {
	return s.Change(ctx, Change{Kind: KindEdit, ConversationID: r.ConversationID, UserID: r.UserID,
		ClientMsgID: r.ClientMsgID, TargetSeq: r.TargetSeq, Body: r.Body})
}

// Recall takes a message back for everyone and erases its body (and its
// edits'): the sender within the recall window, or a group's owner or
// admin at any time. Recalling a recalled message is answered with the
// first recall, Unchanged.
func (s *Service) Recall(ctx context.Context, r RecallRequest) (ChangeResult, error) {
	return s.Change(ctx, Change{Kind: KindRecall, ConversationID: r.ConversationID, UserID: r.UserID,
		ClientMsgID: r.ClientMsgID, TargetSeq: r.TargetSeq})
}

// React sets (On) or removes an emoji on a message: any member, not on a
// recalled message, at most MaxReactionsPerUser distinct emoji per user
// and message and MaxReactionKinds per message. Setting one that is set,
// or removing one that is not, is answered Unchanged and writes nothing.
func (s *Service) React(ctx context.Context, r ReactionRequest) (ChangeResult, error) {
	return s.Change(ctx, Change{Kind: KindReaction, ConversationID: r.ConversationID, UserID: r.UserID,
		ClientMsgID: r.ClientMsgID, TargetSeq: r.TargetSeq, Emoji: r.Emoji, On: r.On})
}

// Change commits one change of any kind (Send, Edit, Recall, React are
// its faces) and waits for the outcome.
func (s *Service) Change(ctx context.Context, c Change) (ChangeResult, error) {
	if err := s.admit(ctx, &c); err != nil {
		return ChangeResult{}, err
	}
	res, err := s.Store.Change(ctx, c)
	s.settle(ctx, c, res.Duplicate || res.Unchanged, err)
	if err != nil {
		return ChangeResult{}, err
	}
	return res, nil
}

// SubmitChange is Change for callers that must not wait, as SubmitSend.
func (s *Service) SubmitChange(ctx context.Context, c Change, done func(ChangeResult, error)) {
	if err := s.admit(ctx, &c); err != nil {
		done(ChangeResult{}, err)
		return
	}
	s.Store.SubmitChange(ctx, c, func(res ChangeResult, err error) {
		s.settle(ctx, c, res.Duplicate || res.Unchanged, err)
		if err != nil {
			res = ChangeResult{}
		}
		done(res, err)
	})
}

// admit validates a change and charges its rate limits (every change of a
// conversation's stream counts as a send).
func (s *Service) admit(ctx context.Context, c *Change) error {
	if err := s.Limits.ValidateChange(c); err != nil {
		return err
	}
	userKey, convKey := UserKey(c.UserID), strconv.FormatInt(c.ConversationID, 10)
	if err := s.take(ctx, RateSend, userKey); err != nil {
		return err
	}
	if err := s.take(ctx, RateConv, convKey); err != nil {
		s.refund(ctx, RateSend, userKey)
		return err
	}
	return nil
}

// settle refunds what a change should not have cost: one that wrote
// nothing new (a duplicate, or one that asked for what already was), or
// one that did not commit because of the server; and the conversation's
// token of one refused because its sender is not in the conversation
// (or it, or the message changed, does not exist): the conversation's
// bucket is its members' budget, which outsiders must not spend.
//
// A change that wrote something new, as nearly every one does, settles
// without an allocation: the keys and the detached context are made only
// for a refund.
func (s *Service) settle(ctx context.Context, c Change, nothingNew bool, err error) {
	// The caller's deadline may have passed by now; a refund is owed all
	// the same, hence context.WithoutCancel.
	if err != nil {
		switch ErrorCode(err) {
		case CodeUnavailable, CodeInternal:
		case CodeNotMember, CodeNotFound:
			s.refund(context.WithoutCancel(ctx), RateConv, strconv.FormatInt(c.ConversationID, 10))
			return
		default:
			return
		}
	} else if !nothingNew {
		return
	}
	ctx = context.WithoutCancel(ctx)
	s.refund(ctx, RateSend, UserKey(c.UserID))
	s.refund(ctx, RateConv, strconv.FormatInt(c.ConversationID, 10))
}

// MarkRead validates and applies a read receipt. The read limit is charged
// per write, not per receipt: a receipt that merges into one already
// waiting for the same conversation (see ReceiptWriter.Pending) is free.
func (s *Service) MarkRead(ctx context.Context, conversationID, userID, seq int64) (ReadResult, error) {
	if err := ValidateID("conversationId", conversationID); err != nil {
		return ReadResult{}, err
	}
	if seq <= 0 {
		return ReadResult{}, Errorf(CodeInvalid, "seq must be a positive integer")
	}
	if s.Receipts == nil || !s.Receipts.Pending(conversationID, userID) {
		if err := s.take(ctx, RateRead, UserKey(userID)); err != nil {
			return ReadResult{}, err
		}
	}
	if s.Receipts != nil {
		return s.Receipts.MarkRead(ctx, conversationID, userID, seq)
	}
	return s.Store.MarkRead(ctx, conversationID, userID, seq)
}

// Typing tells the conversation's members online that userID is typing:
// at most one event per user and conversation per TypingInterval (the rest
// are dropped without an error), within the user's typing rate limit, and
// only from a member. Nothing is stored. The throttle comes before the
// rate limit and the membership check, which costs a query: an indicator
// it holds back is answered as the last one it let through was, so that
// one refused (rate limited, not a member, blocked) is refused for the
// whole interval rather than answered as accepted.
func (s *Service) Typing(ctx context.Context, conversationID, userID int64) error {
	if err := ValidateID("conversationId", conversationID); err != nil {
		return err
	}
	ok, refused := s.typing.allow(userID, conversationID, time.Now())
	if !ok {
		if refused != nil {
			return fmt.Errorf("%w (%w)", refused, ErrTypingHeldBack)
		}
		return nil
	}
	// The per-user limit counts forwarded typing events only: the
	// throttle above already drops the rest.
	if err := s.take(ctx, RateTyping, UserKey(userID)); err != nil {
		s.typing.refuse(userID, conversationID, err)
		return err
	}
	err := s.Store.Typing(ctx, conversationID, userID)
	switch ErrorCode(err) {
	case CodeNotMember, CodeNotFound, CodeBlocked, CodeForbidden:
		s.typing.refuse(userID, conversationID, err)
	}
	return err
}

// ErrTypingHeldBack marks the refusal of a typing indicator the throttle
// held back, repeating the refusal the one it let through in the same
// interval met. That one was told already: a transport may drop this one
// silently where it has no acknowledgement to answer (QoS 0), rather than
// send an error per keystroke.
var ErrTypingHeldBack = errors.New("a typing indicator of the same interval was refused")

// TypingInterval is the least time between two typing events of one user
// in one conversation.
const TypingInterval = time.Second

// typingThrottle remembers when each (user, conversation) last forwarded a
// typing event, and the refusal it met if it was refused; entries older
// than TypingInterval are forgotten once the map holds more than
// typingRemembered, by a scan of the whole map at most once per
// TypingInterval: an event must not pay for a scan each, which a map kept
// above the bound by recent entries (a flood of typing to made-up
// conversations passes the throttle before anything refuses it) would make
// it do, under the lock every typing event of the node takes.
type typingThrottle struct {
	mu    sync.Mutex
	last  map[[2]int64]typingTurn
	swept time.Time // the last scan
}

// typingTurn is the last indicator a (user, conversation) let through:
// when, and what refused it (nil: it went out, or only the database
// stopped it, which says nothing about the next ones).
type typingTurn struct {
	at      time.Time
	refused error
}

// typingRemembered is how many (user, conversation) pairs the throttle
// keeps before it forgets the old ones.
const typingRemembered = 100000

// allow reports whether an indicator of user in conv at now goes on to
// the checks; when it does not, refused is what the last one that did
// met (nil: it went out).
func (t *typingThrottle) allow(user, conv int64, now time.Time) (ok bool, refused error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.last == nil {
		t.last = map[[2]int64]typingTurn{}
	}
	k := [2]int64{user, conv}
	if last := t.last[k]; now.Sub(last.at) < TypingInterval {
		return false, waitedSince(last.refused, now.Sub(last.at))
	}
	t.last[k] = typingTurn{at: now}
	if len(t.last) > typingRemembered && now.Sub(t.swept) >= TypingInterval {
		t.swept = now
		for k, turn := range t.last {
			if now.Sub(turn.at) > TypingInterval {
				delete(t.last, k)
			}
		}
	}
	return true, nil
}

// waitedSince is the refusal err as it stands elapsed later: a rate
// limit's retry is that much nearer.
func waitedSince(err error, elapsed time.Duration) error {
	var e *Error
	if !errors.As(err, &e) || e.RateLimit == nil {
		return err
	}
	rl := *e.RateLimit
	rl.RetryAfter = max(rl.RetryAfter-elapsed, time.Millisecond)
	rl.Reset = max(rl.Reset-elapsed, 0)
	later := *e
	later.RateLimit = &rl
	later.Message = strings.Replace(e.Message, retryText(e.RateLimit.RetryAfter), retryText(rl.RetryAfter), 1)
	return &later
}

// retryText is how a rate limit's reason string says when to retry.
func retryText(d time.Duration) string {
	return "retry in " + d.Round(time.Millisecond).String()
}

// refuse records that the indicator allow last let through for user in
// conv was refused with err: the others of its interval are answered so.
func (t *typingThrottle) refuse(user, conv int64, err error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	k := [2]int64{user, conv}
	if turn, ok := t.last[k]; ok {
		turn.refused = err
		t.last[k] = turn
	}
}

// History validates the query and pages messages.
func (s *Service) History(ctx context.Context, q HistoryQuery) ([]Message, error) {
	if err := validateHistory(&q); err != nil {
		return nil, err
	}
	return s.Store.History(ctx, q)
}

// HistoryPage is History plus the other members' lowest delivered and read
// watermarks, read in the same snapshot when the Store is a HistoryPager
// (otherwise both are 0).
func (s *Service) HistoryPage(ctx context.Context, q HistoryQuery) (HistoryPage, error) {
	if err := validateHistory(&q); err != nil {
		return HistoryPage{}, err
	}
	if hp, ok := s.Store.(HistoryPager); ok {
		return hp.HistoryPage(ctx, q)
	}
	msgs, err := s.Store.History(ctx, q)
	if err != nil {
		return HistoryPage{}, err
	}
	return HistoryPage{Messages: msgs}, nil
}

func validateHistory(q *HistoryQuery) error {
	if err := ValidateID("conversationId", q.ConversationID); err != nil {
		return err
	}
	if q.BeforeSeq < 0 || q.AfterSeq < 0 {
		return Errorf(CodeInvalid, "beforeSeq and afterSeq must not be negative")
	}
	if q.AfterSeq > 0 {
		q.Forward = true
	}
	if q.BeforeSeq > 0 && q.Forward {
		return Errorf(CodeInvalid, "give beforeSeq or afterSeq, not both")
	}
	if q.Limit < 0 {
		return Errorf(CodeInvalid, "limit must not be negative")
	}
	q.Limit = ClampLimit(q.Limit, DefaultHistoryLimit, MaxHistoryLimit)
	return nil
}

// Presence returns target's online state to caller. Only a user who shares
// a conversation with target (or target themself) may ask; anyone else gets
// not_found, as if the user did not exist.
func (s *Service) Presence(ctx context.Context, callerID, targetID int64) (Presence, error) {
	if err := ValidateID("userId", targetID); err != nil {
		return Presence{}, err
	}
	if s.PresenceSource == nil {
		return Presence{}, Errorf(CodeNotFound, "presence is not available on this server")
	}
	if callerID != targetID {
		shared, err := s.PresenceSource.SharesConversation(ctx, callerID, targetID)
		if err != nil {
			return Presence{}, err
		}
		if !shared {
			return Presence{}, Errorf(CodeNotFound, "no user %d among your conversations", targetID)
		}
		if p, ok := s.Store.(PeopleStore); ok {
			visible, err := p.PresenceVisible(ctx, callerID, targetID)
			if err != nil {
				return Presence{}, err
			}
			if !visible {
				return Presence{UserID: targetID, Hidden: true}, nil
			}
		}
	}
	return s.PresenceSource.Presence(ctx, targetID)
}

// Inbox pages the user's conversations, newest first.
func (s *Service) Inbox(ctx context.Context, userID int64, limit int, cursor string) (InboxPage, error) {
	if limit < 0 {
		return InboxPage{}, Errorf(CodeInvalid, "limit must not be negative")
	}
	if cursor != "" {
		if _, _, err := DecodeInboxCursor(cursor); err != nil {
			return InboxPage{}, err
		}
	}
	return s.Store.Inbox(ctx, userID, ClampLimit(limit, DefaultInboxLimit, MaxInboxLimit), cursor)
}

// SeenBy answers "seen by N" for one message.
func (s *Service) SeenBy(ctx context.Context, conversationID, userID, seq int64) (SeenResult, error) {
	if err := ValidateID("conversationId", conversationID); err != nil {
		return SeenResult{}, err
	}
	if err := ValidateID("seq", seq); err != nil {
		return SeenResult{}, err
	}
	return s.Store.SeenBy(ctx, conversationID, userID, seq)
}

// CreateGroup creates a group with the caller as owner, without an
// idempotency key.
func (s *Service) CreateGroup(ctx context.Context, creatorID int64, title string, members []int64) (Conversation, error) {
	conv, _, err := s.CreateGroupWith(ctx, GroupRequest{CreatorID: creatorID, Title: title, Members: members})
	return conv, err
}

// CreateGroupWith creates the group g asks for; created is false when g's
// key made it before (a retry), whose group is answered as it is now.
func (s *Service) CreateGroupWith(ctx context.Context, g GroupRequest) (conv Conversation, created bool, err error) {
	if g.Title, err = newGroupTitle(g.Title); err != nil {
		return Conversation{}, false, err
	}
	if g.Key != "" {
		if g.Key, err = ValidateClientMsgID(g.Key); err != nil {
			return Conversation{}, false, err
		}
	}
	seen := map[int64]bool{g.CreatorID: true}
	uniq := []int64{}
	for _, m := range g.Members {
		if err := ValidateID("member id", m); err != nil {
			return Conversation{}, false, err
		}
		if !seen[m] {
			seen[m] = true
			uniq = append(uniq, m)
		}
	}
	if len(uniq)+1 > s.Limits.MaxMembers {
		return Conversation{}, false, Errorf(CodeMemberCap, "a group has at most %d members", s.Limits.MaxMembers)
	}
	g.Members = uniq
	return s.Store.CreateGroup(ctx, g)
}

// OpenDirect returns the pair's DIRECT conversation, creating it if needed.
func (s *Service) OpenDirect(ctx context.Context, userID, peerID int64) (Conversation, bool, error) {
	if err := ValidateID("peerId", peerID); err != nil {
		return Conversation{}, false, err
	}
	if peerID == userID {
		return Conversation{}, false, Errorf(CodeInvalid, "a direct conversation needs two different users")
	}
	return s.Store.OpenDirect(ctx, userID, peerID)
}

// GetConversation returns a conversation with members, for members only.
func (s *Service) GetConversation(ctx context.Context, conversationID, userID int64) (Conversation, error) {
	if err := ValidateID("conversationId", conversationID); err != nil {
		return Conversation{}, err
	}
	return s.Store.GetConversation(ctx, conversationID, userID)
}

// AddMember adds userID as a plain member (owner/admin only).
func (s *Service) AddMember(ctx context.Context, conversationID, actorID, userID int64) (Member, bool, error) {
	if err := ValidateID("conversationId", conversationID); err != nil {
		return Member{}, false, err
	}
	if err := ValidateID("userId", userID); err != nil {
		return Member{}, false, err
	}
	return s.Store.AddMember(ctx, conversationID, actorID, userID, RoleMember)
}

// RemoveMember removes userID; owner/admin may remove others, anyone may
// leave, nobody but the owner may remove the owner.
func (s *Service) RemoveMember(ctx context.Context, conversationID, actorID, userID int64) error {
	if err := ValidateID("conversationId", conversationID); err != nil {
		return err
	}
	if err := ValidateID("userId", userID); err != nil {
		return err
	}
	return s.Store.RemoveMember(ctx, conversationID, actorID, userID)
}

// ValidateTitle rejects a title a group may not be created with (see
// newGroupTitle).
func (l Limits) ValidateTitle(title string) error {
	_, err := newGroupTitle(title)
	return err
}

// newGroupTitle is the title a group is created with: none (empty or
// blank), or one that obeys the rule a rename does (ValidateGroupTitle),
// so no title gets past creation that a rename would refuse.
func newGroupTitle(title string) (string, error) {
	if utf8.ValidString(title) && strings.TrimSpace(title) == "" {
		return "", nil
	}
	return ValidateGroupTitle(title)
}

// EncodeInboxCursor makes the opaque keyset cursor of the inbox: the sort key
// (unix micros of the last activity) and the conversation id of the last row.
func EncodeInboxCursor(atMicros, id int64) string {
	return base64.RawURLEncoding.EncodeToString([]byte(strconv.FormatInt(atMicros, 10) + ":" + strconv.FormatInt(id, 10)))
}

// DecodeInboxCursor parses a cursor made by EncodeInboxCursor.
func DecodeInboxCursor(c string) (atMicros, id int64, err error) {
	bad := Errorf(CodeInvalid, "cursor is not one this server returned")
	raw, err := base64.RawURLEncoding.DecodeString(c)
	if err != nil {
		return 0, 0, bad
	}
	a, b, ok := strings.Cut(string(raw), ":")
	if !ok {
		return 0, 0, bad
	}
	if atMicros, err = strconv.ParseInt(a, 10, 64); err != nil {
		return 0, 0, bad
	}
	if id, err = strconv.ParseInt(b, 10, 64); err != nil || id <= 0 {
		return 0, 0, bad
	}
	return atMicros, id, nil
}

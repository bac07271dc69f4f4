package chat

import (
	"context"
	"encoding/base64"
	"strconv"
	"strings"
	"unicode/utf8"
)

// Service is the one entry point transports use: it validates input, calls
// the Store and, after commit, tells the Notifier so connected clients get
// the events without waiting for the outbox relay.
type Service struct {
	Store    Store
	Notifier Notifier // may be nil
	Limits   Limits
}

// NewService wires a Store and a Notifier with limits (zero = defaults).
func NewService(st Store, n Notifier, l Limits) *Service {
	return &Service{Store: st, Notifier: n, Limits: l.withDefaults()}
}

func (s *Service) notify(ev Event) {
	if s.Notifier != nil {
		s.Notifier.Notify(ev)
	}
}

// Send validates and commits a message, then notifies (not for duplicates:
// their event went out with the original).
func (s *Service) Send(ctx context.Context, req SendRequest) (SendResult, error) {
	if err := s.Limits.ValidateSend(&req); err != nil {
		return SendResult{}, err
	}
	res, err := s.Store.Send(ctx, req)
	if err != nil {
		return SendResult{}, err
	}
	if !res.Duplicate {
		s.notify(MessageEvent(res.Message))
	}
	return res, nil
}

// MarkRead validates and applies a read receipt.
func (s *Service) MarkRead(ctx context.Context, conversationID, userID, seq int64) (ReadResult, error) {
	if err := ValidateID("conversationId", conversationID); err != nil {
		return ReadResult{}, err
	}
	if seq <= 0 {
		return ReadResult{}, Errorf(CodeInvalid, "seq must be a positive integer")
	}
	res, err := s.Store.MarkRead(ctx, conversationID, userID, seq)
	if err != nil {
		return ReadResult{}, err
	}
	if res.Advanced {
		s.notify(ReadEvent(conversationID, userID, res.LastReadSeq))
	}
	return res, nil
}

// History validates the query and pages messages.
func (s *Service) History(ctx context.Context, q HistoryQuery) ([]Message, error) {
	if err := ValidateID("conversationId", q.ConversationID); err != nil {
		return nil, err
	}
	if q.BeforeSeq < 0 || q.AfterSeq < 0 {
		return nil, Errorf(CodeInvalid, "beforeSeq and afterSeq must not be negative")
	}
	if q.BeforeSeq > 0 && q.AfterSeq > 0 {
		return nil, Errorf(CodeInvalid, "give beforeSeq or afterSeq, not both")
	}
	if q.Limit < 0 {
		return nil, Errorf(CodeInvalid, "limit must not be negative")
	}
	q.Limit = ClampLimit(q.Limit, DefaultHistoryLimit, MaxHistoryLimit)
	return s.Store.History(ctx, q)
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

// CreateGroup creates a group with the caller as owner.
func (s *Service) CreateGroup(ctx context.Context, creatorID int64, title string, members []int64) (Conversation, error) {
	if len(title) > 200 {
		return Conversation{}, Errorf(CodeInvalid, "title is longer than 200 bytes")
	}
	if err := s.Limits.ValidateTitle(title); err != nil {
		return Conversation{}, err
	}
	seen := map[int64]bool{creatorID: true}
	uniq := []int64{}
	for _, m := range members {
		if err := ValidateID("member id", m); err != nil {
			return Conversation{}, err
		}
		if !seen[m] {
			seen[m] = true
			uniq = append(uniq, m)
		}
	}
	if len(uniq)+1 > s.Limits.MaxMembers {
		return Conversation{}, Errorf(CodeMemberCap, "a group has at most %d members", s.Limits.MaxMembers)
	}
	conv, err := s.Store.CreateGroup(ctx, creatorID, title, uniq)
	if err != nil {
		return Conversation{}, err
	}
	for _, m := range conv.Members {
		s.notify(MemberAddedEvent(conv, m.UserID, creatorID, m.Role))
	}
	return conv, nil
}

// OpenDirect returns the pair's DIRECT conversation, creating it if needed.
func (s *Service) OpenDirect(ctx context.Context, userID, peerID int64) (Conversation, bool, error) {
	if err := ValidateID("peerId", peerID); err != nil {
		return Conversation{}, false, err
	}
	if peerID == userID {
		return Conversation{}, false, Errorf(CodeInvalid, "a direct conversation needs two different users")
	}
	conv, created, err := s.Store.OpenDirect(ctx, userID, peerID)
	if err != nil {
		return Conversation{}, false, err
	}
	if created {
		for _, m := range conv.Members {
			s.notify(MemberAddedEvent(conv, m.UserID, userID, m.Role))
		}
	}
	return conv, created, nil
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
	m, created, ev, err := s.Store.AddMember(ctx, conversationID, actorID, userID, RoleMember)
	if err != nil {
		return Member{}, false, err
	}
	if created {
		s.notify(ev)
	}
	return m, created, nil
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
	ev, err := s.Store.RemoveMember(ctx, conversationID, actorID, userID)
	if err != nil {
		return err
	}
	s.notify(ev)
	return nil
}

// ValidateTitle rejects titles that are not valid UTF-8 or hold NUL.
func (l Limits) ValidateTitle(title string) error {
	if strings.ContainsRune(title, 0) || !utf8.ValidString(title) {
		return Errorf(CodeInvalid, "title must be valid UTF-8 without NUL")
	}
	return nil
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

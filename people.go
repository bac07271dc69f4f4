package chat

import (
	"context"
	"net/url"
	"strings"
	"time"
	"unicode"
	"unicode/utf8"
)

// People and groups: profiles, privacy settings and blocks, group settings,
// roles and ownership. The rules:
//
//   - A profile (display name, avatar, about) is visible to the user and
//     to the users who share a conversation with them; to anyone else the
//     user does not exist (not_found), so ids cannot be probed. An avatar
//     is an https URL or an avatar upload (AvatarPath), whose file the
//     same users fetch; a group's avatar upload its current members do.
//   - A group's owner and admins change its title, about and avatar; only
//     the owner changes historyVisible, grants and takes the admin role,
//     adds admins and transfers ownership. Admins add members and remove
//     plain members; the owner removes anyone; any member may leave. When
//     the owner leaves, the longest-standing admin owns the group, else the
//     longest-standing member; when the last member leaves the group is
//     archived and its avatar upload released (nobody is left who may
//     fetch it). Every such change is an entry of kind system in the
//     conversation's stream (SystemEntry).
//   - Read receipts off: nobody else learns the user's read watermark
//     (no read.updated, not counted in seen-by, 0 in members' lastReadSeq
//     and in readSeq) and, reciprocally, the user learns nobody's. Presence
//     off: the same for online state and last seen.
//   - A blocked user cannot open a direct conversation with the blocker nor
//     write into one, typing indicators included (blocked), sees none
//     of the blocker's presence, and of the blocker's profile only what
//     labels their messages (Profile.SeenByBlocked): every read of it
//     answers that, the avatar's download is not_found, and every
//     profile.updated of the blocker reaches them as that view
//     (ProfileAudience). A block and an unblock are told as a
//     profile.updated of the blocker's unchanged profile, on every node:
//     the blocked user's view changed. The
//     blocker gets no push for what the blocked user writes (the push
//     decider reads the block table itself: internal/push/decider.go).

// Profile is what others see of a user. A user who never set one has an
// empty DisplayName (clients show "User <id>").
type Profile struct {
	ID          int64   `json:"id"`
	DisplayName string  `json:"displayName"`
	Avatar      *string `json:"avatar"` // AvatarPath of an avatar upload, an https URL, or null
	About       string  `json:"about"`
	// LastSeen and Online are the user's presence, when the caller may
	// see it (see Presence.Hidden); omitted otherwise.
	LastSeen  *time.Time `json:"lastSeen,omitempty"`
	Online    *bool      `json:"online,omitempty"`
	UpdatedAt *time.Time `json:"updatedAt,omitempty"`
}

// SeenByBlocked returns p as the users p.ID blocked see it: what labels
// p's messages in the groups they share (id, display name, and the
// updatedAt that orders it) and nothing else, the avatar and about read
// as unset, as a profile without them does. The store answers it to them
// for every read of p (PeopleStore.Profiles) and in every profile.updated
// of p (ProfileAudience).
func (p Profile) SeenByBlocked() Profile {
	return Profile{ID: p.ID, DisplayName: p.DisplayName, UpdatedAt: p.UpdatedAt}
}

// ProfileAudience is who gets a user's profile.updated: Whole (the user,
// and who shares a conversation of at most the large-group size with
// them, but those in Blocked) the profile, Blocked (those of them the
// user blocked) the profile as Profile.SeenByBlocked.
type ProfileAudience struct {
	Whole, Blocked []int64
}

// Events addresses ev, a profile.updated with its user's whole profile,
// to a: the one rule of its delivery, for a change this node committed
// and for one another node did (the event in the outbox and on Kafka
// carries the profile alone, nothing of who blocked whom; each node reads
// the audience itself).
func (a ProfileAudience) Events(ev Event) []Event {
	var out []Event
	if len(a.Whole) > 0 {
		whole := ev
		whole.To = a.Whole
		out = append(out, whole)
	}
	if len(a.Blocked) > 0 {
		seen := ProfileUpdatedEvent(profileOf(ev).SeenByBlocked(), a.Blocked)
		seen.EventID, seen.Trace = ev.EventID, ev.Trace
		out = append(out, seen)
	}
	return out
}

// profileOf is the profile a profile.updated carries
// (ProfileUpdatedEvent's inverse).
func profileOf(ev Event) Profile {
	p := Profile{ID: ev.UserID, UpdatedAt: ev.UpdatedAt}
	if ev.DisplayName != nil {
		p.DisplayName = *ev.DisplayName
	}
	if ev.About != nil {
		p.About = *ev.About
	}
	if ev.Avatar != nil && *ev.Avatar != "" {
		avatar := *ev.Avatar
		p.Avatar = &avatar
	}
	return p
}

// ProfileUpdate is PUT /v1/me. DisplayName is required; AvatarURL and
// About, when nil, keep what is stored, and the empty string clears them.
// AvatarUploadID, when set, makes that avatar upload of the caller's the
// avatar (not with AvatarURL).
type ProfileUpdate struct {
	DisplayName    string
	AvatarURL      *string
	AvatarUploadID *string
	About          *string
}

// AvatarPath is where an avatar upload is fetched (with the bearer token,
// by whoever may see the profile or is in the group); its thumbnail is
// AvatarPath(id) + "/thumbnail".
func AvatarPath(uploadID string) string { return "/v1/attachments/" + uploadID }

// AvatarUploadOf returns the upload id of an avatar that is an
// AvatarPath, and false for an https URL (or anything else).
func AvatarUploadOf(avatar string) (string, bool) {
	id, ok := strings.CutPrefix(avatar, AvatarPath(""))
	if !ok || ValidateUploadID("avatar", id) != nil {
		return "", false
	}
	return id, true
}

// Settings are a user's privacy settings; both default to true.
type Settings struct {
	ReadReceipts bool `json:"readReceipts"`
	Presence     bool `json:"presence"`
}

// SettingsUpdate changes the settings given (nil: unchanged).
type SettingsUpdate struct {
	ReadReceipts *bool
	Presence     *bool
}

// Me is GET /v1/me: the caller's profile and settings.
type Me struct {
	Profile
	Settings Settings `json:"settings"`
	// TokensRevokedBefore is the caller's revocation instant (their
	// tokens issued before it are refused; null: never revoked). A client
	// whose tokens.revoke lost its answer with its connection reads it on
	// its next one to learn whether the revocation happened; it is always
	// present, so that such a client tells "never revoked" from a server
	// that does not say.
	TokensRevokedBefore *time.Time `json:"tokensRevokedBefore"`
}

// Block is one user the caller blocked.
type Block struct {
	UserID    int64     `json:"userId"`
	CreatedAt time.Time `json:"createdAt"`
}

// History visibility of a group (Conversation.HistoryVisible).
const (
	HistoryJoined = "joined" // a member added later reads from their join on
	HistoryAll    = "all"    // every member reads the whole history
)

// A reader's history floor is the highest seq they may not read: their
// join_seq in a group whose history is "joined", else 0. Entries after the
// floor reach them; what such an entry carries of a message at or before
// it is hidden by one rule, FloorHidesEdit, in history, catch-up and live
// delivery alike.

// FloorHidesEdit reports whether a reader whose history floor is floor
// must not read the new body of an edit of message target: the edit is
// theirs (it came after their join), the message it rewrites is not. (A
// reply's snippet is a quote its writer chose to share; a recall or a
// reaction carries nothing of the message.)
func FloorHidesEdit(target, floor int64) bool { return target <= floor }

// HideBeforeFloor empties the body of the edits among entries that a
// reader whose history floor is floor must not read (FloorHidesEdit) and
// marks them BodyHidden: a client must tell such an edit from one that
// cleared a message's text, which it shows.
func HideBeforeFloor(entries []Message, floor int64) {
	for i := range entries {
		if m := &entries[i]; m.Kind == KindEdit && FloorHidesEdit(m.TargetSeq, floor) {
			m.Body, m.BodyHidden = "", true
		}
	}
}

// BeforeFloor returns ev as a reader whose history floor is floor receives
// it: the body of an edit they must not read emptied and marked
// BodyHidden, as history and catch-up show that edit (HideBeforeFloor).
// hidden reports whether it differs from ev.
func (e Event) BeforeFloor(floor int64) (_ Event, hidden bool) {
	if e.Type != EventMessageEdited || !FloorHidesEdit(e.TargetSeq, floor) {
		return e, false
	}
	empty := ""
	e.Body, e.BodyHidden = &empty, true
	return e, true
}

// GroupUpdate is PATCH /v1/conversations/{id}: the settings given change
// (nil: unchanged). AvatarURL "" removes the avatar; AvatarUploadID makes
// an avatar upload of the actor's the avatar (not with AvatarURL).
type GroupUpdate struct {
	Title          *string `json:"title"`
	About          *string `json:"about"`
	AvatarURL      *string `json:"avatarUrl"`
	AvatarUploadID *string `json:"avatarUploadId"`
	HistoryVisible *string `json:"historyVisible"`
}

// MembersPage is a page of a conversation's members: the owner first, then
// admins, then members, each by join time.
type MembersPage struct {
	Members    []Member `json:"members"`
	NextCursor string   `json:"nextCursor"`
}

// Limits of people and groups.
const (
	MaxDisplayNameRunes = 64
	MaxAboutRunes       = 500
	MaxAvatarURLBytes   = 2048
	MaxTitleBytes       = 200
	MaxUsersPerRequest  = 100
	DefaultMembersLimit = 100
	MaxMembersLimit     = 500
)

// ValidateDisplayName trims name and requires 1-64 characters of UTF-8
// without control characters, one of them visible (showsSomething); it
// returns the trimmed name.
func ValidateDisplayName(name string) (string, error) {
	if !utf8.ValidString(name) {
		return "", Errorf(CodeInvalid, "displayName is not valid UTF-8")
	}
	name = strings.TrimSpace(name)
	n := utf8.RuneCountInString(name)
	if n == 0 || n > MaxDisplayNameRunes {
		return "", Errorf(CodeInvalid, "displayName must be 1 to %d characters", MaxDisplayNameRunes)
	}
	if hasControl(name, false) {
		return "", Errorf(CodeInvalid, "displayName must not contain control characters")
	}
	if !showsSomething(name) {
		return "", Errorf(CodeInvalid, "displayName must have a visible character")
	}
	return name, nil
}

// ValidateAbout trims about and allows at most 500 characters; line breaks
// are the only control characters it may hold, and the implicit
// bidirectional marks (U+061C, U+200E, U+200F) the only formatting ones.
func ValidateAbout(what, about string) (string, error) {
	if !utf8.ValidString(about) {
		return "", Errorf(CodeInvalid, "%s is not valid UTF-8", what)
	}
	about = strings.TrimSpace(about)
	if utf8.RuneCountInString(about) > MaxAboutRunes {
		return "", Errorf(CodeInvalid, "%s must be at most %d characters", what, MaxAboutRunes)
	}
	if hasControl(about, true) {
		return "", Errorf(CodeInvalid, "%s must not contain control characters other than line breaks", what)
	}
	return about, nil
}

// ValidateAvatarURL accepts "" (none) or an absolute https URL with a host
// and no credentials, at most 2048 bytes. Only https: the web client's
// content security policy loads images from https origins alone, and a
// plain-http image would be a mixed-content downgrade.
func ValidateAvatarURL(s string) (string, error) {
	s = strings.TrimSpace(s)
	if s == "" {
		return "", nil
	}
	if len(s) > MaxAvatarURLBytes {
		return "", Errorf(CodeInvalid, "avatarUrl must be at most %d bytes", MaxAvatarURLBytes)
	}
	u, err := url.Parse(s)
	if err != nil || u.Scheme != "https" || u.Host == "" || u.User != nil || u.Opaque != "" || hasControl(s, false) {
		return "", Errorf(CodeInvalid, "avatarUrl must be an https:// URL with a host and no user name or password")
	}
	// What is stored is the URL encoded (a non-ASCII character takes up
	// to 12 bytes then): the limit holds for that. url keeps a query as
	// given (its path and fragment it encodes), so the query is encoded
	// here: a client gets no space, quote or raw non-ASCII byte from it.
	u.RawQuery = escapeQuery(u.RawQuery)
	if out := u.String(); len(out) <= MaxAvatarURLBytes {
		return out, nil
	}
	return "", Errorf(CodeInvalid, "avatarUrl must be at most %d bytes, percent-encoded", MaxAvatarURLBytes)
}

// escapeQuery percent-encodes every byte of a raw query that RFC 3986
// does not allow in one, and a '%' that starts no escape; the allowed
// ones (separators included) and valid escapes are kept as given.
func escapeQuery(q string) string {
	const hex = "0123456789ABCDEF"
	var b strings.Builder
	for i := 0; i < len(q); i++ {
		c := q[i]
		switch {
		case c == '%' && i+2 < len(q) && isHex(q[i+1]) && isHex(q[i+2]):
			b.WriteByte(c)
		case c != '%' && (c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || strings.IndexByte("-._~!$&'()*+,;=:@/?", c) >= 0):
			b.WriteByte(c)
		default:
			b.WriteByte('%')
			b.WriteByte(hex[c>>4])
			b.WriteByte(hex[c&15])
		}
	}
	return b.String()
}

func isHex(c byte) bool {
	return c >= '0' && c <= '9' || c >= 'a' && c <= 'f' || c >= 'A' && c <= 'F'
}

// ValidateGroupTitle trims a new group title: 1-200 bytes of UTF-8 without
// control characters, one of them visible (showsSomething).
func ValidateGroupTitle(t string) (string, error) {
	if !utf8.ValidString(t) {
		return "", Errorf(CodeInvalid, "title is not valid UTF-8")
	}
	t = strings.TrimSpace(t)
	if t == "" || len(t) > MaxTitleBytes {
		return "", Errorf(CodeInvalid, "title must be 1 to %d bytes", MaxTitleBytes)
	}
	if hasControl(t, false) {
		return "", Errorf(CodeInvalid, "title must not contain control characters")
	}
	if !showsSomething(t) {
		return "", Errorf(CodeInvalid, "title must have a visible character")
	}
	return t, nil
}

// showsSomething reports whether s has a character that draws something:
// a letter, digit, punctuation or symbol. Marks alone, format characters
// (zero-width spaces and joiners, word joiner, byte order mark) and the
// characters fonts draw as blanks (the Hangul fillers, the blank Braille
// pattern) do not: a name or title of only those shows as empty.
func showsSomething(s string) bool {
	for _, r := range s {
		switch r {
		case '\u115f', '\u1160', '\u3164', '\uffa0', '\u2800':
			continue
		}
		if unicode.In(r, unicode.L, unicode.N, unicode.P, unicode.S) {
			return true
		}
	}
	return false
}

// isImplicitMark reports the bidirectional marks that set no embedding:
// ALM, LRM and RLM.
func isImplicitMark(r rune) bool {
	return r == '\u061c' || r == '\u200e' || r == '\u200f'
}

// rearrangesLine reports the line separators and the bidirectional
// formatting characters (U+061C, U+200E, U+200F, U+202A-U+202E,
// U+2066-U+2069): what a one-line field (a name, a title, a file's name)
// never holds.
func rearrangesLine(r rune) bool {
	return r == '\u2028' || r == '\u2029' || unicode.Is(unicode.Bidi_Control, r)
}

func hasControl(s string, lineBreaks bool) bool {
	for _, r := range s {
		if unicode.IsControl(r) && !(lineBreaks && (r == '\n' || r == '\r' || r == '\t')) {
			return true
		}
		if rearrangesLine(r) && !(lineBreaks && isImplicitMark(r)) {
			// Line separators and every bidirectional formatting
			// character (U+061C, U+200E, U+200F, U+202A-U+202E,
			// U+2066-U+2069): text that rearranges what is shown around
			// it, the implicit marks included in one-line fields (a name
			// ending in U+200F beside a right-to-left one reads as
			// someone else's). Prose (about) keeps the implicit marks:
			// mixed right-to-left writing needs them, and they open no
			// embedding that could reorder what follows the field.
			return true
		}
	}
	return false
}

// PeopleStore is the store of record's side of people and groups
// (store.Store implements it). Like Store, every method is one
// transaction; writes publish what they committed.
type PeopleStore interface {
	// Profiles returns the profiles of ids that viewerID may see (the
	// viewer, and users sharing a conversation with them), in ids' order;
	// others are left out. A user who blocked the viewer is answered as
	// Profile.SeenByBlocked.
	Profiles(ctx context.Context, viewerID int64, ids []int64) ([]Profile, error)
	// SetProfile stores userID's profile and, when it changed, publishes
	// profile.updated to the users who share a conversation of at most
	// largeGroup members (ProfileAudience) and writes it to the outbox.
	SetProfile(ctx context.Context, userID int64, p ProfileUpdate, largeGroup int) (Profile, error)
	Settings(ctx context.Context, userID int64) (Settings, error)
	SetSettings(ctx context.Context, userID int64, u SettingsUpdate) (Settings, error)

	// Block and Unblock are idempotent. One that changes what the blocked
	// user sees of the blocker's profile (they are in its audience of
	// largeGroup) publishes the blocker's profile.updated as SetProfile
	// does, the profile unchanged: the blocked user's view of it changed.
	Block(ctx context.Context, blockerID, blockedID int64, largeGroup int) error
	Unblock(ctx context.Context, blockerID, blockedID int64, largeGroup int) error
	Blocks(ctx context.Context, blockerID int64) ([]Block, error)
	// BlockedBy returns those of users who blocked senderID.
	BlockedBy(ctx context.Context, senderID int64, users []int64) ([]int64, error)

	// PresenceVisible reports whether viewerID may see subjectID's
	// presence: both share it, and subjectID did not block viewerID.
	PresenceVisible(ctx context.Context, viewerID, subjectID int64) (bool, error)

	UpdateGroup(ctx context.Context, conversationID, actorID int64, u GroupUpdate) (Conversation, error)
	SetRole(ctx context.Context, conversationID, actorID, userID int64, role Role) (Member, error)
	TransferOwnership(ctx context.Context, conversationID, actorID, userID int64) error
	MembersPage(ctx context.Context, conversationID, userID int64, limit int, cursor string) (MembersPage, error)

	Search(ctx context.Context, q SearchQuery) (SearchPage, error)
}

// people returns the Store's PeopleStore side.
func (s *Service) people() (PeopleStore, error) {
	if p, ok := s.Store.(PeopleStore); ok {
		return p, nil
	}
	return nil, Errorf(CodeNotFound, "profiles, groups settings and search are not available on this server")
}

// DefaultLargeGroup is the member count above which a conversation gets no
// presence and profile pushes (the delivery hub's LargeGroup).
const DefaultLargeGroup = 200

// Me returns the caller's own profile and settings.
func (s *Service) Me(ctx context.Context, userID int64) (Me, error) {
	p, err := s.people()
	if err != nil {
		return Me{}, err
	}
	ps, err := p.Profiles(ctx, userID, []int64{userID})
	if err != nil {
		return Me{}, err
	}
	me := Me{Profile: Profile{ID: userID}}
	if len(ps) == 1 {
		me.Profile = ps[0]
	}
	if me.Settings, err = p.Settings(ctx, userID); err != nil {
		return Me{}, err
	}
	if t, ok := s.Store.(TokenStore); ok {
		before, err := t.TokensRevokedBefore(ctx, userID)
		if err != nil {
			return Me{}, err
		}
		if !before.IsZero() {
			before = before.UTC()
			me.TokensRevokedBefore = &before
		}
	}
	return me, nil
}

// SetProfile validates and stores the caller's profile.
func (s *Service) SetProfile(ctx context.Context, userID int64, u ProfileUpdate) (Profile, error) {
	p, err := s.people()
	if err != nil {
		return Profile{}, err
	}
	if u.DisplayName, err = ValidateDisplayName(u.DisplayName); err != nil {
		return Profile{}, err
	}
	if err := validateAboutAndAvatar(&u.About, &u.AvatarURL, u.AvatarUploadID); err != nil {
		return Profile{}, err
	}
	return p.SetProfile(ctx, userID, u, s.largeGroup())
}

// largeGroup is the member count above which a conversation gets no
// profile pushes.
func (s *Service) largeGroup() int {
	if s.LargeGroup <= 0 {
		return DefaultLargeGroup
	}
	return s.LargeGroup
}

// Profile returns one user's profile to viewerID: not_found unless they
// share a conversation (or it is the viewer). LastSeen and Online are set
// when the viewer may see the user's presence.
func (s *Service) Profile(ctx context.Context, viewerID, userID int64) (Profile, error) {
	if err := ValidateID("userId", userID); err != nil {
		return Profile{}, err
	}
	p, err := s.people()
	if err != nil {
		return Profile{}, err
	}
	ps, err := p.Profiles(ctx, viewerID, []int64{userID})
	if err != nil {
		return Profile{}, err
	}
	if len(ps) == 0 {
		return Profile{}, Errorf(CodeNotFound, "no user %d among your conversations", userID)
	}
	prof := ps[0]
	if s.PresenceSource != nil && viewerID != userID {
		pr, err := s.Presence(ctx, viewerID, userID)
		if err == nil && !pr.Hidden {
			online := pr.Online
			prof.Online, prof.LastSeen = &online, pr.LastSeen
		}
	}
	return prof, nil
}

// Profiles returns the profiles of up to 100 ids the viewer may see, in
// the order asked; ids the viewer may not see are left out, as unknown ones
// are, so the answer says nothing about who exists.
func (s *Service) Profiles(ctx context.Context, viewerID int64, ids []int64) ([]Profile, error) {
	if len(ids) == 0 {
		return nil, Errorf(CodeInvalid, "ids is empty: give 1 to %d user ids", MaxUsersPerRequest)
	}
	if len(ids) > MaxUsersPerRequest {
		return nil, Errorf(CodeInvalid, "at most %d user ids per request", MaxUsersPerRequest)
	}
	seen := map[int64]bool{}
	uniq := make([]int64, 0, len(ids))
	for _, id := range ids {
		if err := ValidateID("id", id); err != nil {
			return nil, err
		}
		if !seen[id] {
			seen[id] = true
			uniq = append(uniq, id)
		}
	}
	p, err := s.people()
	if err != nil {
		return nil, err
	}
	return p.Profiles(ctx, viewerID, uniq)
}

// Settings returns the caller's privacy settings.
func (s *Service) Settings(ctx context.Context, userID int64) (Settings, error) {
	p, err := s.people()
	if err != nil {
		return Settings{}, err
	}
	return p.Settings(ctx, userID)
}

// SetSettings changes the caller's privacy settings.
func (s *Service) SetSettings(ctx context.Context, userID int64, u SettingsUpdate) (Settings, error) {
	p, err := s.people()
	if err != nil {
		return Settings{}, err
	}
	st, err := p.SetSettings(ctx, userID, u)
	if err != nil {
		return Settings{}, err
	}
	if u.Presence != nil {
		s.presenceVisibilityChanged(userID, !st.Presence)
	}
	return st, nil
}

// Block blocks userID for the caller (idempotent).
func (s *Service) Block(ctx context.Context, blockerID, userID int64) error {
	if err := ValidateID("userId", userID); err != nil {
		return err
	}
	if userID == blockerID {
		return Errorf(CodeInvalid, "you cannot block yourself")
	}
	p, err := s.people()
	if err != nil {
		return err
	}
	if err := p.Block(ctx, blockerID, userID, s.largeGroup()); err != nil {
		return err
	}
	s.presenceVisibilityChanged(blockerID, true)
	return nil
}

// Unblock lifts a block (idempotent).
func (s *Service) Unblock(ctx context.Context, blockerID, userID int64) error {
	if err := ValidateID("userId", userID); err != nil {
		return err
	}
	p, err := s.people()
	if err != nil {
		return err
	}
	if err := p.Unblock(ctx, blockerID, userID, s.largeGroup()); err != nil {
		return err
	}
	s.presenceVisibilityChanged(blockerID, false)
	return nil
}

// Blocks lists the users the caller blocked, newest first.
func (s *Service) Blocks(ctx context.Context, blockerID int64) ([]Block, error) {
	p, err := s.people()
	if err != nil {
		return nil, err
	}
	return p.Blocks(ctx, blockerID)
}

// IsBlocked answers "did blockerID block userID?" (a blocked user's
// messages never reach the blocker in a direct conversation, but they
// still may in a group they share; the push decider asks the same of the
// block table for every recipient in its statement).
func (s *Service) IsBlocked(ctx context.Context, blockerID, userID int64) (bool, error) {
	ids, err := s.BlockedBy(ctx, userID, []int64{blockerID})
	return len(ids) == 1, err
}

// BlockedBy returns those of recipients who blocked senderID: IsBlocked for
// a whole fan-out in one query.
func (s *Service) BlockedBy(ctx context.Context, senderID int64, recipients []int64) ([]int64, error) {
	if len(recipients) == 0 {
		return nil, nil
	}
	p, err := s.people()
	if err != nil {
		return nil, err
	}
	return p.BlockedBy(ctx, senderID, recipients)
}

// validateGiven replaces *v, when given, with what validate makes of it.
func validateGiven(v **string, validate func(string) (string, error)) error {
	if *v == nil {
		return nil
	}
	s, err := validate(**v)
	if err != nil {
		return err
	}
	*v = &s
	return nil
}

// validateAboutAndAvatar validates the about and avatar a profile or a
// group update gives (nil: unchanged): an avatar URL or an avatar upload,
// not both.
func validateAboutAndAvatar(about, avatarURL **string, avatarUploadID *string) error {
	if err := validateGiven(about, func(s string) (string, error) { return ValidateAbout("about", s) }); err != nil {
		return err
	}
	if avatarUploadID != nil {
		if *avatarURL != nil {
			return Errorf(CodeInvalid, `give avatarUrl or avatarUploadId, not both (avatarUrl "" clears the avatar)`)
		}
		return ValidateUploadID("avatarUploadId", *avatarUploadID)
	}
	return validateGiven(avatarURL, ValidateAvatarURL)
}

// UpdateGroup changes a group's settings (see GroupUpdate): owner or admin,
// historyVisible the owner only. Nothing given is invalid; values equal to
// the current ones write nothing.
func (s *Service) UpdateGroup(ctx context.Context, conversationID, actorID int64, u GroupUpdate) (Conversation, error) {
	if err := ValidateID("conversationId", conversationID); err != nil {
		return Conversation{}, err
	}
	if u.Title == nil && u.About == nil && u.AvatarURL == nil && u.AvatarUploadID == nil && u.HistoryVisible == nil {
		return Conversation{}, Errorf(CodeInvalid, "give at least one of title, about, avatarUrl, avatarUploadId, historyVisible")
	}
	if err := validateGiven(&u.Title, ValidateGroupTitle); err != nil {
		return Conversation{}, err
	}
	if err := validateAboutAndAvatar(&u.About, &u.AvatarURL, u.AvatarUploadID); err != nil {
		return Conversation{}, err
	}
	if u.HistoryVisible != nil && *u.HistoryVisible != HistoryJoined && *u.HistoryVisible != HistoryAll {
		return Conversation{}, Errorf(CodeInvalid, `historyVisible must be "joined" or "all"`)
	}
	p, err := s.people()
	if err != nil {
		return Conversation{}, err
	}
	return p.UpdateGroup(ctx, conversationID, actorID, u)
}

// SetRole makes userID an admin or a plain member: the owner only.
func (s *Service) SetRole(ctx context.Context, conversationID, actorID, userID int64, role Role) (Member, error) {
	if err := ValidateID("conversationId", conversationID); err != nil {
		return Member{}, err
	}
	if err := ValidateID("userId", userID); err != nil {
		return Member{}, err
	}
	if role != RoleAdmin && role != RoleMember {
		return Member{}, Errorf(CodeInvalid, `role must be "admin" or "member" (ownership moves with POST .../owner)`)
	}
	p, err := s.people()
	if err != nil {
		return Member{}, err
	}
	return p.SetRole(ctx, conversationID, actorID, userID, role)
}

// TransferOwnership makes userID the group's owner; the previous owner
// becomes an admin. The owner only.
func (s *Service) TransferOwnership(ctx context.Context, conversationID, actorID, userID int64) error {
	if err := ValidateID("conversationId", conversationID); err != nil {
		return err
	}
	if err := ValidateID("userId", userID); err != nil {
		return err
	}
	p, err := s.people()
	if err != nil {
		return err
	}
	return p.TransferOwnership(ctx, conversationID, actorID, userID)
}

// MembersPage pages a conversation's members with roles and join times,
// members only.
func (s *Service) MembersPage(ctx context.Context, conversationID, userID int64, limit int, cursor string) (MembersPage, error) {
	if err := ValidateID("conversationId", conversationID); err != nil {
		return MembersPage{}, err
	}
	if limit < 0 {
		return MembersPage{}, Errorf(CodeInvalid, "limit must not be negative")
	}
	p, err := s.people()
	if err != nil {
		return MembersPage{}, err
	}
	return p.MembersPage(ctx, conversationID, userID, ClampLimit(limit, DefaultMembersLimit, MaxMembersLimit), cursor)
}

// AddMemberAs adds userID with role (member, or admin: the owner only).
func (s *Service) AddMemberAs(ctx context.Context, conversationID, actorID, userID int64, role Role) (Member, bool, error) {
	if err := ValidateID("conversationId", conversationID); err != nil {
		return Member{}, false, err
	}
	if err := ValidateID("userId", userID); err != nil {
		return Member{}, false, err
	}
	if role == "" {
		role = RoleMember
	}
	if role != RoleAdmin && role != RoleMember {
		return Member{}, false, Errorf(CodeInvalid, `role must be "admin" or "member"`)
	}
	return s.Store.AddMember(ctx, conversationID, actorID, userID, role)
}

// MaxBlocksPerUser is how many users one user may block: any id may be
// blocked, and GET /v1/me/blocks lists them all in one reply.
const MaxBlocksPerUser = 10000

package client

import (
	"bufio"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"sync"
	"time"

	"github.com/google/uuid"
)

// PendingSend is a change (a message, or an edit, recall or reaction of
// one) the server has not acknowledged yet.
type PendingSend struct {
	ClientMsgID    string    `json:"id"`
	ConversationID int64     `json:"conv"`
	Body           string    `json:"body"`
	QueuedAt       time.Time `json:"at"`
	// Kind is "" (or KindMessage) for a message; the other fields say
	// what a message replies to or forwards, or which message a change
	// targets.
	Kind      string      `json:"kind,omitempty"`
	TargetSeq int64       `json:"target,omitempty"`
	ReplyTo   int64       `json:"replyTo,omitempty"`
	Forward   *MessageRef `json:"forward,omitempty"`
	Emoji     string      `json:"emoji,omitempty"`
	On        bool        `json:"on,omitempty"`
	// Attachments are a message's uploads (complete before the send).
	Attachments []AttachmentRef `json:"attachments,omitempty"`
}

// MessageRef names a message of a conversation (what to forward).
type MessageRef struct {
	ConversationID int64 `json:"conversationId"`
	Seq            int64 `json:"seq"`
}

// journal is the durable record of unacknowledged sends: a JSON-lines file
// in the session dir, each send appended and fsynced before it is
// published, each acknowledgement appended after. It does not rely on
// paho's session store, which paho wipes whenever the server answers
// "session present = 0" (as chatd does after a restart). Without a session
// dir it lives in memory only.
type journal struct {
	mu      sync.Mutex
	path    string // "" = memory only
	f       *os.File
	pending map[string]PendingSend
	// order is each pending send's place in the order it was recorded
	// (the file's line order), next the place of the next one: sends are
	// listed, and sent again after a restart, in that order, not by
	// QueuedAt, which a wall clock stepped back would reorder.
	order  map[string]uint64
	next   uint64
	done   int  // "done" lines since the last compaction
	closed bool // close ran: nothing is recorded any more
}

type journalLine struct {
	Op string `json:"op"` // "send" or "done"
	PendingSend
}

const journalFile = "pending.jsonl"

// openJournal loads dir's journal (empty dir = in memory) and compacts it
// to the outstanding sends.
func openJournal(dir string) (*journal, error) {
	j := &journal{pending: map[string]PendingSend{}, order: map[string]uint64{}}
	if dir == "" {
		return j, nil
	}
	j.path = filepath.Join(dir, journalFile)
	if err := j.load(); err != nil {
		return nil, err
	}
	if err := j.compact(); err != nil {
		return nil, err
	}
	return j, nil
}

// maxJournalLine is the longest line load reads back; add refuses a send
// whose line would be longer (errTooLargeForJournal).
const maxJournalLine = 16 << 20

// errTooLargeForJournal: the change cannot be recorded, so it is not sent
// (no chatd accepts a publish anywhere near this size either).
var errTooLargeForJournal = errors.New("the change is too large to record in the send journal")

func (j *journal) load() error {
	f, err := os.Open(j.path)
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("open send journal: %w", err)
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 64*1024), maxJournalLine)
	for sc.Scan() {
		var l journalLine
		if err := json.Unmarshal(sc.Bytes(), &l); err != nil {
			// A torn last line (crash mid-append) was never acknowledged
			// to the caller as queued; skip it.
			continue
		}
		l.ClientMsgID = journaledID(l.ClientMsgID)
		switch l.Op {
		case "send":
			if _, ok := j.pending[l.ClientMsgID]; !ok {
				j.order[l.ClientMsgID] = j.next
				j.next++
			}
			j.pending[l.ClientMsgID] = l.PendingSend
		case "done":
			delete(j.pending, l.ClientMsgID)
			delete(j.order, l.ClientMsgID)
		}
	}
	if err := sc.Err(); err != nil {
		return fmt.Errorf("read send journal: %w", err)
	}
	return nil
}

// journaledID is id as Commit keeps it: a UUID lower case, as chatd
// keeps it. A journal written before Commit did so holds the id as its
// caller gave it; kept upper case, its send, resumed after the restart,
// would not be found in history (where chatd's lower-case id is) when
// its PUBACKs lack their seq, and would hold up the conversation's later
// sends for ever, and a SendWithID of the same id would not join it.
func journaledID(id string) string {
	if u, err := uuid.Parse(id); err == nil && len(id) == 36 {
		return u.String()
	}
	return id
}

// compact rewrites the file with the outstanding sends only and reopens it
// for appending. Callers hold mu (or own j exclusively).
func (j *journal) compact() error {
	if j.f != nil {
		j.f.Close()
		j.f = nil
	}
	var buf []byte
	for _, p := range j.sortedLocked() {
		b, err := json.Marshal(journalLine{Op: "send", PendingSend: p})
		if err != nil {
			return fmt.Errorf("encode send journal: %w", err)
		}
		buf = append(append(buf, b...), '\n')
	}
	if err := writeFileSync(j.path, buf); err != nil {
		return fmt.Errorf("compact send journal: %w", err)
	}
	f, err := os.OpenFile(j.path, os.O_WRONLY|os.O_APPEND, 0o600)
	if err != nil {
		return fmt.Errorf("open send journal: %w", err)
	}
	j.f, j.done = f, 0
	return nil
}

// add records p durably (fsync) unless its id is already pending; it
// reports whether p was added.
func (j *journal) add(p PendingSend) (bool, error) {
	j.mu.Lock()
	defer j.mu.Unlock()
	if _, ok := j.pending[p.ClientMsgID]; ok {
		return false, nil
	}
	if j.path != "" {
		if j.closed {
			return false, ErrClosed
		}
		b, err := json.Marshal(journalLine{Op: "send", PendingSend: p})
		if err != nil {
			return false, fmt.Errorf("record send in journal: %w", err)
		}
		if len(b) >= maxJournalLine {
			// load could not read the line back: no later New on this
			// SessionDir would start.
			return false, errTooLargeForJournal
		}
		if err := j.reopenLocked(); err != nil {
			return false, fmt.Errorf("record send in journal: %w", err)
		}
		if err := j.writeLocked(b, true); err != nil {
			return false, fmt.Errorf("record send in journal: %w", err)
		}
	}
	j.pending[p.ClientMsgID] = p
	j.order[p.ClientMsgID] = j.next
	j.next++
	return true, nil
}

// remove records that id needs no more sending. A lost "done" line only
// causes one resend, which chatd de-duplicates, so it is not fsynced.
func (j *journal) remove(id string) error {
	j.mu.Lock()
	defer j.mu.Unlock()
	if _, ok := j.pending[id]; !ok {
		return nil
	}
	delete(j.pending, id)
	delete(j.order, id)
	if j.path == "" || j.closed {
		return nil
	}
	if j.f == nil {
		// A write or compaction failed before: rewrite the file now.
		return j.compact()
	}
	if len(j.pending) == 0 {
		// Nothing outstanding: empty the file. Unsynced, like "done".
		if err := j.f.Truncate(0); err != nil {
			return fmt.Errorf("truncate send journal: %w", err)
		}
		j.done = 0
		return nil
	}
	if j.done > 1000 {
		return j.compact()
	}
	j.done++
	return j.appendLocked(journalLine{Op: "done", PendingSend: PendingSend{ClientMsgID: id}}, false)
}

// reopenLocked rewrites the file from memory (a compaction) when the last
// write or compaction failed and left no file to append to.
func (j *journal) reopenLocked() error {
	if j.f != nil {
		return nil
	}
	return j.compact()
}

// appendLocked appends one line. A failed write or fsync may leave part of
// the line, or lose earlier unsynced ones, so the file is dropped: the
// next change rewrites it whole from memory (reopenLocked) instead of
// appending a line to a torn one, which would make it unreadable.
func (j *journal) appendLocked(l journalLine, sync bool) error {
	b, err := json.Marshal(l)
	if err != nil {
		return err
	}
	return j.writeLocked(b, sync)
}

// writeLocked appends the encoded line b.
func (j *journal) writeLocked(b []byte, sync bool) error {
	_, err := j.f.Write(append(b, '\n'))
	if err == nil && sync {
		err = j.f.Sync()
	}
	if err != nil {
		j.f.Close()
		j.f = nil
	}
	return err
}

// list returns the outstanding sends in the order they were recorded.
func (j *journal) list() []PendingSend {
	j.mu.Lock()
	defer j.mu.Unlock()
	return j.sortedLocked()
}

func (j *journal) sortedLocked() []PendingSend {
	out := make([]PendingSend, 0, len(j.pending))
	for _, p := range j.pending {
		out = append(out, p)
	}
	sort.Slice(out, func(a, b int) bool { return j.order[out[a].ClientMsgID] < j.order[out[b].ClientMsgID] })
	return out
}

func (j *journal) close() error {
	j.mu.Lock()
	defer j.mu.Unlock()
	j.closed = true
	if j.f == nil {
		return nil
	}
	err := j.f.Close()
	j.f = nil
	return err
}

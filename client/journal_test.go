package client

import (
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/google/uuid"
)

// TestASendRecordedAfterAFailedJournalCompactionIsStillOnDisk: the journal
// compacts itself after 1000 acknowledgements. When that rewrite fails
// (the disk is full, the temporary file cannot be created), the sends
// recorded after it must still reach the file (or fail to be recorded),
// never be kept in memory only while the caller is told they are safe:
// a crash would lose them.
func TestASendRecordedAfterAFailedJournalCompactionIsStillOnDisk(t *testing.T) {
	dir := t.TempDir()
	j, err := openJournal(dir)
	if err != nil {
		t.Fatal(err)
	}
	send := func() PendingSend {
		p := PendingSend{ClientMsgID: uuid.NewString(), ConversationID: 1, Body: "b", QueuedAt: time.Now().UTC()}
		if _, err := j.add(p); err != nil {
			t.Fatalf("add: %v", err)
		}
		return p
	}
	waiting := send() // stays unacknowledged: the file is never emptied
	// The compaction's temporary file cannot be created.
	if err := os.Mkdir(filepath.Join(dir, journalFile+".tmp"), 0o700); err != nil {
		t.Fatal(err)
	}
	compactionFailed := false
	for range 1002 {
		if err := j.remove(send().ClientMsgID); err != nil {
			compactionFailed = true
		}
	}
	if !compactionFailed {
		t.Fatal("the compaction did not fail: the test does not test anything")
	}
	if err := os.Remove(filepath.Join(dir, journalFile+".tmp")); err != nil {
		t.Fatal(err)
	}
	p := PendingSend{ClientMsgID: uuid.NewString(), ConversationID: 1, Body: "after the failed compaction", QueuedAt: time.Now().UTC()}
	if _, err := j.add(p); err != nil {
		t.Logf("add after the failed compaction refused: %v", err) // acceptable: the caller knows
		p = PendingSend{}
	}
	if err := j.close(); err != nil {
		t.Fatal(err)
	}

	// A crash now: the next client opens what is on disk.
	again, err := openJournal(dir)
	if err != nil {
		t.Fatal(err)
	}
	defer again.close()
	got := map[string]bool{}
	for _, q := range again.list() {
		got[q.ClientMsgID] = true
	}
	if !got[waiting.ClientMsgID] {
		t.Errorf("the send recorded before the failed compaction is lost")
	}
	if p.ClientMsgID != "" && !got[p.ClientMsgID] {
		t.Errorf("the send recorded after the failed compaction was reported safe but is not on disk (%d pending on disk)", len(got))
	}
}

package store_test

import (
	"context"
	"fmt"
	"os"
	"sync"
	"testing"

	chat "github.com/chatd/chatd"
	"github.com/chatd/chatd/internal/pgembed"
	"github.com/chatd/chatd/store"
)

// A group created or joined takes a lock per pair of the newcomer and
// each member (lockPairs) and one per member for presence (lockSharing):
// some 400 for a group of 200 created at once. PostgreSQL's table of locks
// holds max_locks_per_transaction × max_connections (64 × 100 by
// default): a burst of such creates on a pool of chatd's default size
// (32) filled it, and PostgreSQL refused the creates that found it full
// ("out of shared memory"). The embedded cluster is started with room for
// them.
func TestABurstOfGroupsOf200CreatedAtOnceAllCommitOnTheEmbeddedCluster(t *testing.T) {
	ctx := testCtx(t)
	dir, err := os.MkdirTemp("", "locktable") // reachable by the account PostgreSQL runs as under root
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	if err := os.Chmod(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	pool, closeDB, err := pgembed.Open(ctx, "", dir, 32, nil) // chatd's default db_max_conns
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = closeDB(context.Background()) })
	if _, err := store.Migrate(ctx, pool); err != nil {
		t.Fatal(err)
	}
	st := store.New(pool, chat.DefaultLimits())
	t.Cleanup(func() { _ = st.Close(context.Background()) })

	const groups, size = 40, 200
	var wg sync.WaitGroup
	errs := make(chan error, groups)
	for g := range groups {
		wg.Add(1)
		go func() {
			defer wg.Done()
			members := make([]int64, size)
			for i := range members {
				members[i] = int64(1000 + g*size + i)
			}
			_, _, err := st.CreateGroup(ctx, chat.GroupRequest{CreatorID: members[0], Title: fmt.Sprint("class ", g), Members: members[1:],
				Key: fmt.Sprintf("123e4567-e89b-12d3-a456-426614174%03d", g)})
			if err != nil {
				errs <- fmt.Errorf("create group %d: %w", g, err)
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
}

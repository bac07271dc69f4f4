package httpapi_test

import (
	"context"
	"net/http"
	"sync"
	"testing"

	chat "github.com/chatd/chatd"
	"github.com/chatd/chatd/internal/httpapi"
	"github.com/chatd/chatd/internal/pgtest"
)

// TestAUserBlocksAtMostMaxBlocksPerUserSoTheirListStaysBounded: any user
// id may be blocked and GET /v1/me/blocks answers every block in one
// reply, so without a cap one account could store blocks without end
// and make each listing read them all. A block past
// chat.MaxBlocksPerUser is 409 conflict (HTTP and RPC) and stores
// nothing; blocking someone blocked already, and blocking again once a
// block is lifted, still work at the cap.
func TestAUserBlocksAtMostMaxBlocksPerUserSoTheirListStaysBounded(t *testing.T) {
	e := newEnv(t)
	if _, err := e.pool.Exec(context.Background(), `INSERT INTO user_block (blocker_id, blocked_id)
		SELECT 1, g FROM generate_series(100, 99 + $1::int) AS g`, chat.MaxBlocksPerUser); err != nil {
		t.Fatal(err)
	}
	if r := e.do(1, "PUT", "/v1/me/blocks/5", nil); r.status != http.StatusConflict || r.errorCode() != "conflict" {
		t.Errorf("a block past the cap: %d %s, want 409 conflict", r.status, truncate(r.body))
	}
	if rr := e.rpc(1, "block", `{"userId":6}`); rr.status != http.StatusConflict || rr.code != "conflict" {
		t.Errorf("RPC block past the cap: %s, want 409 conflict", rr.raw)
	}
	var bl httpapi.BlocksReply
	e.must(http.StatusOK, 1, "GET", "/v1/me/blocks", nil, &bl)
	if len(bl.Blocked) != chat.MaxBlocksPerUser {
		t.Errorf("%d blocks listed, want %d", len(bl.Blocked), chat.MaxBlocksPerUser)
	}
	e.must(http.StatusNoContent, 1, "PUT", "/v1/me/blocks/100", nil, nil)
	e.must(http.StatusNoContent, 1, "DELETE", "/v1/me/blocks/101", nil, nil)
	e.must(http.StatusNoContent, 1, "PUT", "/v1/me/blocks/5", nil, nil)
	if blocked, err := e.svc.IsBlocked(t.Context(), 1, 5); err != nil || !blocked {
		t.Errorf("a block once one was lifted: blocked %v, %v", blocked, err)
	}
}

// TestBlocksRacingForTheLastPlaceUnderTheCapStoreOne: of blocks sent at
// once when one place is left, one is stored and the others refused.
func TestBlocksRacingForTheLastPlaceUnderTheCapStoreOne(t *testing.T) {
	e := newEnv(t)
	if _, err := e.pool.Exec(context.Background(), `INSERT INTO user_block (blocker_id, blocked_id)
		SELECT 1, g FROM generate_series(100, 98 + $1::int) AS g`, chat.MaxBlocksPerUser); err != nil {
		t.Fatal(err)
	}
	const n = 8
	var wg sync.WaitGroup
	for i := range n {
		wg.Go(func() { e.api.RPC(context.Background(), 1, "block", []byte(pathf(`{"userId":%d}`, 2+i))) })
	}
	wg.Wait()
	if got := pgtest.QueryOne[int64](t, e.pool, `SELECT count(*) FROM user_block WHERE blocker_id = 1`); got != chat.MaxBlocksPerUser {
		t.Errorf("%d blocks stored after %d raced for the last place, want %d", got, n, chat.MaxBlocksPerUser)
	}
}

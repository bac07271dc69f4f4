package push_test

import (
	"context"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/chatd/chatd/internal/push"
)

// The remove a recall owes, and the update an edit owes, for the
// notification bob's devices show when the newer one claimed meanwhile
// reaches none (recalled_older, edited_older) are decided when that
// claim ends: skipped (the result writer), handed back by a stopping
// node (the result writer), or its lease run out unsent (the next
// claim). chat_push_removes_total and chat_push_updates_total count
// them as they count the decider's: each push sent is counted, by
// whichever node decided it.
func TestRemovesAndUpdatesOwedWhenTheNewerPushReachesNoDeviceAreCounted(t *testing.T) {
	t.Parallel()
	ends := []struct {
		name    string
		outcome string        // the claim's result, written by the claiming node
		lease   time.Duration // the claim's
	}{
		{"skipped", "skipped", time.Minute},
		{"handed back", "release", time.Minute},
		{"lease ran out unsent", "", time.Second},
	}
	for _, change := range []string{"recall", "edit"} {
		for _, end := range ends {
			t.Run(change+", "+end.name, func(t *testing.T) {
				t.Parallel()
				ctx := context.Background()
				r := newRig(t)
				r.cfg.Preview = true
				claiming := prometheus.NewRegistry()
				r.cfg.Registerer = claiming
				p, conv, zero, _, c := r.bobShownZeroAndClaimedOneFor(end.lease)
				if change == "recall" {
					r.recall(conv, 1, zero)
				} else {
					r.edit(conv, 1, zero, "zero, fixed")
				}
				if _, err := r.decide(ctx, p, conv); err != nil {
					t.Fatal(err)
				}
				if end.outcome != "" {
					if err := push.WriteResult(ctx, p, c, end.outcome, 0); err != nil {
						t.Fatal(err)
					}
				} else {
					r.waitCount(0, 5*time.Second, `SELECT count(*) FROM push_job WHERE lease_until >= now()`)
				}
				next := prometheus.NewRegistry()
				r.start(func(c *push.Config) { c.Registerer = next })
				got := r.waitPushes("bob", 2, 5*time.Second)
				want := map[string]float64{"chat_push_removes_total": 0, "chat_push_updates_total": 0}
				if change == "recall" {
					want["chat_push_removes_total"] = 1
					if got[1].Type != push.TypeRemove || got[1].Seq != zero {
						t.Errorf("bob's push after the recall = %+v, want the remove of %d", got[1], zero)
					}
				} else {
					want["chat_push_updates_total"] = 1
					if got[1].Type != push.TypeUpdate || got[1].Seq != zero {
						t.Errorf("bob's push after the edit = %+v, want the update of %d", got[1], zero)
					}
				}
				r.waitCount(0, 5*time.Second, `SELECT count(*) FROM push_job WHERE user_id = 2 AND state <> 'sent'`)
				for name, n := range want {
					// Before: 0 for each (the decider counted none: it
					// owed nothing then; the claim's end counted nothing).
					if c := counter(t, claiming, name) + counter(t, next, name); c != n {
						t.Errorf("%s = %v over both nodes, want %v", name, c, n)
					}
				}
			})
		}
	}
}

// counter reads counter name (no labels) from reg: 0 when absent.
func counter(t *testing.T, reg *prometheus.Registry, name string) float64 {
	t.Helper()
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() == name {
			return mf.GetMetric()[0].GetCounter().GetValue()
		}
	}
	return 0
}

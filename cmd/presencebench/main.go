//go:build unix

// Command presencebench measures what telling presence on a join, and on
// a removal, costs a team that shares many groups (docs/benchmarks.md,
// "Presence on a join", "Presence on a removal"): -team users (1..team)
// in -groups groups of all of them. It prints
//
//  1. the time of creating a group of the whole team as the number of
//     groups it shares grows (the create's transaction reads which pairs
//     start sharing: store's presenceStartedSQL);
//  2. the time of adding a newcomer to a group of team-1 of them, and of
//     adding one of them to a group of one;
//  3. what a node's tracker reads for that newcomer's member.added
//     (presence.Tracker.SharingStarted), for the pairs the event lists:
//     store.Presence.Watching of those pairs, against Watchers of every
//     subject (each one's whole audience), which it read before;
//  4. the time of removing one of them from a group of all of them (the
//     removal's transaction reads whom it stops sharing presence with:
//     store's presenceEndedSQL; nobody, they share the other groups);
//  5. for another team, who share nothing but each have -dms direct
//     conversations with others, the time of creating a group of all of
//     them, and what a tracker reads for its conversation.created; and
//     of removing one of them from that group (all 199 others listed),
//     and what a tracker with all of them connected reads for that
//     member.removed (presence.Tracker.SharingEnded: store.Presence.Watching
//     of the pairs its hidden events address, no conversation given).
//
// Each figure is the median and the worst of -runs runs.
//
//	go run ./cmd/presencebench                 # a team of 200 in 60 groups
//	go run ./cmd/presencebench -team 50 -groups 20
//
// Without -database-url it starts a private PostgreSQL (pgembed, fsync
// on) in a temporary directory, and removes it afterwards.
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"slices"
	"sync"
	"syscall"
	"time"

	chat "github.com/chatd/chatd"
	"github.com/chatd/chatd/internal/benchdb"
	"github.com/chatd/chatd/internal/pgembed"
	"github.com/chatd/chatd/store"
)

type options struct {
	team, groups, runs, dms int
	databaseURL             string
}

func main() {
	var o options
	flag.IntVar(&o.team, "team", 200, "users in every group (at most CHAT_LARGE_GROUP, 200, for presence to be told)")
	flag.IntVar(&o.groups, "groups", 60, "groups of the whole team")
	flag.IntVar(&o.runs, "runs", 5, "runs of each measurement")
	flag.IntVar(&o.dms, "dms", 60, "direct conversations of each user of a second team, who share nothing (0: skip)")
	flag.StringVar(&o.databaseURL, "database-url", "", "an empty PostgreSQL database to use (default: a temporary embedded cluster, fsync on)")
	flag.Parse()
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := run(ctx, o); err != nil {
		fmt.Fprintln(os.Stderr, "presencebench:", err)
		os.Exit(1)
	}
}

// added keeps the last member.added, conversation.created and
// member.removed the store publishes.
type added struct {
	mu                   sync.Mutex
	ev, created, removed chat.Event
}

func (a *added) Publish(evs ...chat.Event) {
	a.mu.Lock()
	defer a.mu.Unlock()
	for _, ev := range evs {
		switch ev.Type {
		case chat.EventMemberAdded:
			a.ev = ev
		case chat.EventConversationCreated:
			a.created = ev
		case chat.EventMemberRemoved:
			a.removed = ev
		}
	}
}

func (a *added) last() chat.Event {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.ev
}

func (a *added) lastRemoved() chat.Event {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.removed
}

func (a *added) lastCreated() chat.Event {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.created
}

func run(ctx context.Context, o options) error {
	if o.team < 3 || o.team > chat.DefaultLargeGroup || o.groups < 1 || o.runs < 1 {
		return fmt.Errorf("need 3 <= -team <= %d, -groups >= 1, -runs >= 1", chat.DefaultLargeGroup)
	}
	url := o.databaseURL
	if url == "" {
		c, stopDB, err := benchdb.Start(ctx, "presencebench", nil)
		if err != nil {
			return err
		}
		defer stopDB()
		url = c.URL("presencebench")
	}
	pool, err := pgembed.OpenPool(ctx, url, 4)
	if err != nil {
		return err
	}
	defer pool.Close()
	if _, err := store.Migrate(ctx, pool); err != nil {
		return fmt.Errorf("migrate: %w", err)
	}
	// As with a relay (Kafka): the outbox rows are written.
	if err := store.WantOutboxRows(ctx, pool); err != nil {
		return err
	}
	pub := &added{}
	st := store.New(pool, chat.DefaultLimits(), store.WithPublisher(pub))
	defer st.Close(context.Background())
	pr := store.NewPresence(pool, time.Minute)

	members := make([]int64, 0, o.team-1)
	for u := int64(2); u <= int64(o.team); u++ {
		members = append(members, u)
	}
	group := func(creator int64, members []int64) (chat.Conversation, error) {
		c, _, err := st.CreateGroup(ctx, chat.GroupRequest{CreatorID: creator, Title: "team", Members: members})
		if err != nil {
			return chat.Conversation{}, fmt.Errorf("create group: %w", err)
		}
		return c, nil
	}

	fmt.Printf("a team of %d users; creating a group of all of them, as the groups they share grow (%d runs at each step):\n", o.team, o.runs)
	shared := 0
	for _, step := range steps(o.groups) {
		for shared < step {
			if _, err := group(1, members); err != nil {
				return err
			}
			shared++
		}
		var took []time.Duration
		for range o.runs {
			start := time.Now()
			if _, err := group(1, members); err != nil {
				return err
			}
			took = append(took, time.Since(start))
			shared++
		}
		fmt.Printf("  sharing %3d groups: create %s\n", step, figures(took))
	}

	fmt.Printf("sharing %d groups:\n", shared)
	var addNew, addOne []time.Duration
	var shown map[int64][]int64
	var shownIn int64
	for i := range o.runs {
		g, err := group(1, members[:len(members)-1])
		if err != nil {
			return err
		}
		newcomer := int64(1_000_000 + i)
		start := time.Now()
		if _, _, err := st.AddMember(ctx, g.ID, 1, newcomer, ""); err != nil {
			return fmt.Errorf("add member: %w", err)
		}
		addNew = append(addNew, time.Since(start))
		shown, shownIn = pub.last().PresenceShown, pub.last().ConversationID
		one, err := group(2_000_000+int64(i), nil)
		if err != nil {
			return err
		}
		start = time.Now()
		if _, _, err := st.AddMember(ctx, one.ID, one.Members[0].UserID, 2, ""); err != nil {
			return fmt.Errorf("add member: %w", err)
		}
		addOne = append(addOne, time.Since(start))
	}
	fmt.Printf("  add a newcomer to a group of %d of them: %s\n", o.team-1, figures(addNew))
	fmt.Printf("  add one of them to a group of one: %s\n", figures(addOne))

	// What a node with all of them connected reads for the newcomer's
	// member.added.
	if err := tracker(ctx, pr, "the newcomer's member.added", shown, shownIn, o.runs); err != nil {
		return err
	}

	// One of them removed from a group of all of them, a different one
	// each run: they still share the other groups.
	all, err := group(1, members)
	if err != nil {
		return err
	}
	var removes []time.Duration
	for i := range o.runs {
		start := time.Now()
		if err := st.RemoveMember(ctx, all.ID, 1, members[i]); err != nil {
			return fmt.Errorf("remove member: %w", err)
		}
		removes = append(removes, time.Since(start))
	}
	fmt.Printf("  remove one of them from a group of all of them: %s (hidden from %d)\n", figures(removes), len(pub.lastRemoved().PresenceHiddenFrom))

	if o.dms > 0 {
		// Another team, each with -dms direct conversations with users
		// outside it, and a group of all of them.
		base := int64(10_000_000)
		others := make([]int64, 0, o.team-1)
		for u := base + 2; u <= base+int64(o.team); u++ {
			others = append(others, u)
		}
		for u := base + 1; u <= base+int64(o.team); u++ {
			for k := range int64(o.dms) {
				if _, _, err := st.OpenDirect(ctx, u, 20_000_000+u*1000+k); err != nil {
					return fmt.Errorf("open direct: %w", err)
				}
			}
		}
		fmt.Printf("a team of %d users who share nothing, each with %d direct conversations with others:\n", o.team, o.dms)
		var took, removes, ended []time.Duration
		var created chat.Event
		hiddenFrom, endedPairs := 0, 0
		for i := range o.runs {
			// Each run's group is the team's first: the users of a new
			// team each time would need their direct conversations again.
			start := time.Now()
			c, err := group(base+1, others)
			if err != nil {
				return err
			}
			took = append(took, time.Since(start))
			if i == 0 {
				created = pub.lastCreated()
				if err := tracker(ctx, pr, "its conversation.created", created.PresenceShown, c.ID, o.runs); err != nil {
					return err
				}
			}
			start = time.Now()
			if err := st.RemoveMember(ctx, c.ID, base+1, others[i%len(others)]); err != nil {
				return fmt.Errorf("remove member: %w", err)
			}
			removes = append(removes, time.Since(start))
			removed := pub.lastRemoved()
			hiddenFrom = len(removed.PresenceHiddenFrom)
			var d time.Duration
			if endedPairs, d, err = trackerEnded(ctx, pr, removed); err != nil {
				return err
			}
			ended = append(ended, d)
			if _, err := pool.Exec(ctx, `DELETE FROM conversation_member WHERE conversation_id = $1`, c.ID); err != nil {
				return fmt.Errorf("empty the group: %w", err)
			}
		}
		fmt.Printf("  create a group of all of them: %s\n", figures(took))
		fmt.Printf("  remove one of them from it: %s (hidden from %d)\n", figures(removes), hiddenFrom)
		fmt.Printf("    its member.removed, read by a tracker (Watching of its %d pairs, pushEnded): %s\n", endedPairs, figures(ended))
	}
	return nil
}

// tracker times what a node with every user of shown connected reads
// for the event that listed them (pushStarted): Watching of its pairs,
// and Watchers of its subjects (each one's whole audience), which it read
// before.
func tracker(ctx context.Context, pr *store.Presence, what string, shown map[int64][]int64, conv int64, runs int) error {
	var subjects, watchers, via []int64
	each := map[int64]bool{}
	for w, ss := range shown {
		for _, s := range ss {
			subjects, watchers, via = append(subjects, s), append(watchers, w), append(via, conv)
			each[s] = true
		}
	}
	distinct := make([]int64, 0, len(each))
	for s := range each {
		distinct = append(distinct, s)
	}
	var watching, all []time.Duration
	for range runs {
		start := time.Now()
		if _, err := pr.Watching(ctx, subjects, watchers, via, chat.DefaultLargeGroup); err != nil {
			return err
		}
		watching = append(watching, time.Since(start))
		start = time.Now()
		if _, err := pr.Watchers(ctx, distinct, chat.DefaultLargeGroup); err != nil {
			return err
		}
		all = append(all, time.Since(start))
	}
	fmt.Printf("  %s, read by a tracker (%d pairs, %d subjects):\n", what, len(subjects), len(distinct))
	fmt.Printf("    Watching of its pairs (pushStarted): %s\n", figures(watching))
	fmt.Printf("    Watchers of its subjects (what pushStarted read before): %s\n", figures(all))
	return nil
}

// trackerEnded times what a node with every user of a member.removed
// connected reads for it (pushEnded): Watching of the pairs its hidden
// events address, no conversation given (none is shared now unless a
// later join made it so). It returns how many pairs.
func trackerEnded(ctx context.Context, pr *store.Presence, removed chat.Event) (int, time.Duration, error) {
	var subjects, watchers, via []int64
	for _, ev := range chat.PresenceEndedEvents(removed, func(int64) bool { return true }) {
		for _, w := range ev.To {
			subjects, watchers, via = append(subjects, ev.UserID), append(watchers, w), append(via, 0)
		}
	}
	start := time.Now()
	if _, err := pr.Watching(ctx, subjects, watchers, via, chat.DefaultLargeGroup); err != nil {
		return 0, 0, err
	}
	return len(subjects), time.Since(start), nil
}

// steps are the numbers of shared groups to measure at: 1, then about
// every sixth of groups, up to groups.
func steps(groups int) []int {
	out := []int{1}
	for k := max(1, groups/6); k <= groups; k += max(1, groups/6) {
		if k > out[len(out)-1] {
			out = append(out, k)
		}
	}
	if out[len(out)-1] != groups {
		out = append(out, groups)
	}
	return out
}

// figures is the median and the worst of took.
func figures(took []time.Duration) string {
	slices.Sort(took)
	return fmt.Sprintf("median %v, worst %v", took[len(took)/2].Round(10*time.Microsecond), took[len(took)-1].Round(10*time.Microsecond))
}

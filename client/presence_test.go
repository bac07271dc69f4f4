package client_test

import (
	"errors"
	"testing"
	"time"

	"github.com/chatd/chatd/client"
	"github.com/chatd/chatd/internal/testkit"
)

// Presence over the Go client: a contact's state and the caller's own are
// answered, a user the caller shares no conversation with is ErrNotFound
// (code not_found, 404) as if they did not exist, and a user who hides
// their presence reads as Hidden.
func TestPresenceOfAUserOverTheGoClient(t *testing.T) {
	t.Parallel()
	a, b, _ := pair(t)
	ctx := ctxFor(t, 30*time.Second)

	var p client.Presence
	testkit.WaitFor(t, 10*time.Second, "user 2 online to user 1", func() bool {
		var err error
		if p, err = a.Presence(ctx, 2); err != nil {
			t.Fatalf("Presence of a contact: %v", err)
		}
		return p.Online
	})
	if p.UserID != 2 || p.LastSeen == nil || p.Hidden {
		t.Fatalf("Presence of an online contact: %+v", p)
	}
	if p, err := a.Presence(ctx, 1); err != nil || p.UserID != 1 || !p.Online {
		t.Fatalf("own Presence: %+v, %v", p, err)
	}

	_, err := a.Presence(ctx, 3)
	var ce *client.Error
	if !errors.Is(err, client.ErrNotFound) || !errors.As(err, &ce) || ce.Code != "not_found" || ce.Status != 404 {
		t.Fatalf("Presence of a stranger: %v, want ErrNotFound (not_found, 404)", err)
	}

	if _, err := b.SetSettings(ctx, client.SettingsUpdate{Presence: new(bool)}); err != nil {
		t.Fatal(err)
	}
	if p, err := a.Presence(ctx, 2); err != nil || !p.Hidden || p.Online || p.LastSeen != nil {
		t.Fatalf("Presence of a contact who hides it: %+v, %v", p, err)
	}
}

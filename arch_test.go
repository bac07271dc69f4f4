package chat_test

import (
	"os/exec"
	"strings"
	"testing"
)

// The adapters depend on the domain, never on each other: each wraps one
// dependency (mochi, PostgreSQL, Kafka, HTTP) and talks to the others only
// through the ports of package chat. A rule broken here is a cycle in the
// making.
var forbiddenImports = map[string][]string{
	"store":             {"broker", "hooks", "internal/delivery", "internal/httpapi", "internal/relay", "internal/presence", "server"},
	"internal/delivery": {"store", "hooks", "broker", "internal/httpapi", "internal/relay", "internal/presence", "server"},
	"hooks":             {"store", "internal/delivery", "broker", "internal/httpapi", "internal/relay", "internal/presence", "server"},
	"broker":            {"store", "internal/delivery", "internal/httpapi", "internal/relay", "server"},
	"internal/relay":    {"store", "hooks", "broker", "internal/delivery", "internal/httpapi", "server"},
	"internal/httpapi":  {"store", "hooks", "broker", "internal/delivery", "internal/relay", "server"},
	"internal/presence": {"store", "hooks", "broker", "internal/delivery", "internal/httpapi", "internal/relay", "server"},
	"internal/pgembed":  {"store", "hooks", "broker", "internal/delivery", "server"},
	// The rule of PostgreSQL failures, shared by the stores on PostgreSQL
	// (store, the push device store): a leaf they both import.
	"internal/pgerr": {"store", "hooks", "broker", "internal/delivery", "internal/httpapi", "internal/relay", "internal/presence", "internal/push", "server"},
	// The count of connections per client address that have sent nothing
	// yet, shared by the broker and the HTTP servers: a leaf.
	"internal/conncap": {"store", "hooks", "broker", "internal/delivery", "internal/httpapi", "internal/relay", "internal/presence", "server"},
	// Attachments: the subsystem reaches its stores through the domain's
	// ports; the blob stores and the media checks know nothing of chatd.
	"internal/attach": {"store", "hooks", "broker", "internal/delivery", "internal/httpapi", "internal/relay", "internal/blob", "server"},
	"internal/blob":   {"store", "hooks", "broker", "internal/delivery", "internal/httpapi", "internal/relay", "internal/attach", "internal/media", "server"},
	"internal/media":  {"store", "hooks", "broker", "internal/delivery", "internal/httpapi", "internal/relay", "internal/attach", "internal/blob", "server"},
}

// The root package is the domain: it imports neither the broker nor the
// database driver, nor any package of chatd's.
var domainForbidden = []string{"github.com/mochi-mqtt/", "github.com/jackc/pgx", "github.com/segmentio/kafka-go", "github.com/chatd/chatd/"}

func TestAdaptersImportTheDomainAndNeverEachOther(t *testing.T) {
	out, err := exec.Command("go", "list", "-f", `{{.ImportPath}}:{{join .Imports " "}}`, "./...").Output()
	if err != nil {
		t.Skipf("go list: %v", err)
	}
	const mod = "github.com/chatd/chatd"
	seen := 0
	for _, line := range strings.Split(strings.TrimSpace(string(out)), "\n") {
		pkg, imports, _ := strings.Cut(line, ":")
		rel := strings.TrimPrefix(strings.TrimPrefix(pkg, mod), "/")
		deps := strings.Fields(imports)
		if pkg == mod {
			for _, d := range deps {
				for _, f := range domainForbidden {
					if strings.HasPrefix(d, f) {
						t.Errorf("the domain (package chat) imports %s", d)
					}
				}
			}
			continue
		}
		banned, ok := forbiddenImports[rel]
		if !ok {
			continue
		}
		seen++
		for _, d := range deps {
			for _, b := range banned {
				if d == mod+"/"+b || strings.HasPrefix(d, mod+"/"+b+"/") {
					t.Errorf("%s imports %s", rel, b)
				}
			}
		}
	}
	if seen != len(forbiddenImports) {
		t.Errorf("go list showed %d of the %d adapters the rules name: a package moved?", seen, len(forbiddenImports))
	}
}

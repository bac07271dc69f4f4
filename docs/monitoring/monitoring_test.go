// Package monitoring_test checks the files operators load into Prometheus
// and Grafana: the alerting rules pass promtool, and every chatd metric
// they or the dashboard name is one chatd exports.
package monitoring_test

import (
	"encoding/json"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// promtool finds promtool, and skips the test (loudly) where it is
// missing, except under CI.
func promtool(t *testing.T) string {
	t.Helper()
	p, err := exec.LookPath("promtool")
	if err != nil {
		if os.Getenv("CI") != "" {
			t.Fatal("promtool is missing under CI: .ci/run installs Debian's prometheus package")
		}
		t.Skip("SKIPPED LOUDLY: promtool not found (apt-get install prometheus); the alerting rules were not checked")
	}
	return p
}

func TestAlertRulesPassPromtool(t *testing.T) {
	out, err := exec.Command(promtool(t), "check", "rules", "alerts.yml").CombinedOutput()
	if err != nil {
		t.Fatalf("promtool check rules alerts.yml: %v\n%s", err, out)
	}
	if !strings.Contains(string(out), "SUCCESS") {
		t.Fatalf("promtool said:\n%s", out)
	}
}

// TestAlertsFireAsTheirPromtoolTestsSay runs alerts_test.yml: series
// under which an alert must fire, and ones under which it must not.
func TestAlertsFireAsTheirPromtoolTestsSay(t *testing.T) {
	out, err := exec.Command(promtool(t), "test", "rules", "alerts_test.yml").CombinedOutput()
	if err != nil {
		t.Fatalf("promtool test rules alerts_test.yml: %v\n%s", err, out)
	}
}

var metricRE = regexp.MustCompile(`\bchat_[a-z0-9_]+`)

// exported collects the metric names chatd's Go sources define: the
// "chat_..." literals of files that use Prometheus's client, given as a
// metric's Name or as the first argument of a helper that makes one
// (d("chat_pg_pool_conns", ...)). Other literals of that prefix (SQL
// names such as "chat_outbox", lock keys) are not metrics, and a name
// found only among them must not pass.
func exported(t *testing.T) map[string]bool {
	t.Helper()
	names := map[string]bool{}
	def := regexp.MustCompile(`(?:Name:\s*|\w\(\s*)"(chat_[a-z0-9_]+)"`)
	err := filepath.WalkDir(filepath.Join("..", ".."), func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() && (d.Name() == "node_modules" || d.Name() == ".git" || d.Name() == "testdata" || p == filepath.Join("..", "..", "cmd")) {
			return filepath.SkipDir // cmd/: the benchmarks read metrics, chatd's packages define them
		}
		if d.IsDir() || !strings.HasSuffix(p, ".go") || strings.HasSuffix(p, "_test.go") {
			return nil
		}
		b, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		if !strings.Contains(string(b), `"github.com/prometheus/client_golang/prometheus"`) {
			return nil
		}
		for _, m := range def.FindAllStringSubmatch(string(b), -1) {
			names[m[1]] = true
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if len(names) < 50 {
		t.Fatalf("found only %d metric definitions: %v", len(names), names)
	}
	return names
}

func known(names map[string]bool, m string) bool {
	for _, suffix := range []string{"", "_bucket", "_count", "_sum"} {
		if base, ok := strings.CutSuffix(m, suffix); ok && names[base] {
			return true
		}
	}
	return false
}

func TestAlertsAndDashboardNameOnlyMetricsChatdExports(t *testing.T) {
	names := exported(t)
	rules, err := os.ReadFile("alerts.yml")
	if err != nil {
		t.Fatal(err)
	}
	for _, m := range metricRE.FindAllString(string(rules), -1) {
		if !known(names, m) {
			t.Errorf("alerts.yml names %s, which chatd does not export", m)
		}
	}
	raw, err := os.ReadFile("grafana-dashboard.json")
	if err != nil {
		t.Fatal(err)
	}
	var d struct {
		Panels []struct {
			Title   string `json:"title"`
			Targets []struct {
				Expr string `json:"expr"`
			} `json:"targets"`
		} `json:"panels"`
	}
	if err := json.Unmarshal(raw, &d); err != nil {
		t.Fatalf("grafana-dashboard.json: %v", err)
	}
	if len(d.Panels) < 10 {
		t.Fatalf("dashboard has %d panels", len(d.Panels))
	}
	for _, p := range d.Panels {
		if len(p.Targets) == 0 {
			t.Errorf("panel %q has no query", p.Title)
		}
		for _, tg := range p.Targets {
			ms := metricRE.FindAllString(tg.Expr, -1)
			if len(ms) == 0 {
				t.Errorf("panel %q: %q names no chatd metric", p.Title, tg.Expr)
			}
			for _, m := range ms {
				if !known(names, m) {
					t.Errorf("panel %q names %s, which chatd does not export", p.Title, m)
				}
			}
		}
	}
}

// TestOperationsMonitoringTableNamesOnlyMetricsChatdExports checks the
// table operators read first, "What to monitor" in docs/operations.md.
func TestOperationsMonitoringTableNamesOnlyMetricsChatdExports(t *testing.T) {
	names := exported(t)
	raw, err := os.ReadFile(filepath.Join("..", "operations.md"))
	if err != nil {
		t.Fatal(err)
	}
	_, section, ok := strings.Cut(string(raw), "\n## What to monitor")
	if !ok {
		t.Fatal(`operations.md has no "## What to monitor" section`)
	}
	section, _, _ = strings.Cut(section, "\n## ")
	rows := 0
	for _, line := range strings.Split(section, "\n") {
		cells := strings.Split(line, "|")
		if len(cells) < 3 || !strings.Contains(cells[1], "`") {
			continue
		}
		rows++
		for _, m := range metricRE.FindAllString(cells[1], -1) {
			if !known(names, m) {
				t.Errorf("operations.md's What to monitor names %s, which chatd does not export", m)
			}
		}
	}
	if rows < 20 {
		t.Fatalf("read %d metric rows from What to monitor", rows)
	}
}

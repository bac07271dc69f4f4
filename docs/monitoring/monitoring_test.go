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

func TestAlertRulesPassPromtool(t *testing.T) {
	promtool, err := exec.LookPath("promtool")
	if err != nil {
		if os.Getenv("CI") != "" {
			t.Fatal("promtool is missing under CI: .ci/run installs Debian's prometheus package")
		}
		t.Skip("SKIPPED LOUDLY: promtool not found (apt-get install prometheus); the alerting rules were not checked")
	}
	out, err := exec.Command(promtool, "check", "rules", "alerts.yml").CombinedOutput()
	if err != nil {
		t.Fatalf("promtool check rules alerts.yml: %v\n%s", err, out)
	}
	if !strings.Contains(string(out), "SUCCESS") {
		t.Fatalf("promtool said:\n%s", out)
	}
}

var metricRE = regexp.MustCompile(`\bchat_[a-z0-9_]+`)

// exported collects the metric names chatd's Go sources define.
func exported(t *testing.T) map[string]bool {
	t.Helper()
	names := map[string]bool{}
	def := regexp.MustCompile(`"(chat_[a-z0-9_]+)"`)
	err := filepath.WalkDir(filepath.Join("..", ".."), func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() && (d.Name() == "node_modules" || d.Name() == ".git" || d.Name() == "testdata") {
			return filepath.SkipDir
		}
		if d.IsDir() || !strings.HasSuffix(p, ".go") || strings.HasSuffix(p, "_test.go") {
			return nil
		}
		b, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		for _, m := range def.FindAllStringSubmatch(string(b), -1) {
			names[m[1]] = true
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
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

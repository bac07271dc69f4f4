package buildinfo

import (
	"runtime"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
)

func TestStringNamesVersionRevisionTimeAndGo(t *testing.T) {
	s := Info{Version: "v1.2.0", Revision: "1a2b3c", Time: "2026-01-02T03:04:05Z", Modified: true, GoVersion: "go1.26.8"}.String()
	for _, want := range []string{"v1.2.0", "revision 1a2b3c+modified", "2026-01-02T03:04:05Z", "go1.26.8", runtime.GOOS + "/" + runtime.GOARCH} {
		if !strings.Contains(s, want) {
			t.Errorf("%q lacks %q", s, want)
		}
	}
	if g := Get(); g.GoVersion != runtime.Version() || g.Version == "" {
		t.Errorf("Get() = %+v", g)
	}
}

func TestBuildInfoGaugeIsOneWithTheBuildLabels(t *testing.T) {
	reg := prometheus.NewRegistry()
	Register(reg)
	i := Get()
	want := `# HELP chat_build_info Build of the running chatd: always 1, the labels say which (version, revision, goversion).
# TYPE chat_build_info gauge
chat_build_info{goversion="` + i.GoVersion + `",revision="` + i.Revision + `",version="` + i.Version + `"} 1
`
	if err := testutil.GatherAndCompare(reg, strings.NewReader(want), "chat_build_info"); err != nil {
		t.Fatal(err)
	}
}

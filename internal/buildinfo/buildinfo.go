// Package buildinfo reports what binary is running: the module version,
// the VCS revision and commit time the Go toolchain stamped into it
// (runtime/debug.ReadBuildInfo), and the Go version. chatd and chatctl
// print it for --version, chatd logs it when ready and exports it as the
// chat_build_info gauge. Read-only and safe for concurrent use.
package buildinfo

import (
	"fmt"
	"runtime"
	"runtime/debug"
	"sync"

	"github.com/prometheus/client_golang/prometheus"
)

// Info describes the running binary. Fields the toolchain did not stamp
// are "unknown" (Revision, Time) or "(devel)" (Version).
type Info struct {
	Version   string // module version, e.g. v1.2.0, or (devel) for a build from a work tree
	Revision  string // VCS revision (commit hash)
	Time      string // VCS commit time, RFC 3339
	Modified  bool   // the work tree had uncommitted changes
	GoVersion string
}

var (
	once sync.Once
	info Info
)

// Get returns the running binary's build information.
func Get() Info {
	once.Do(func() {
		info = Info{Version: "(devel)", Revision: "unknown", Time: "unknown", GoVersion: runtime.Version()}
		bi, ok := debug.ReadBuildInfo()
		if !ok {
			return
		}
		if v := bi.Main.Version; v != "" {
			info.Version = v
		}
		for _, s := range bi.Settings {
			switch s.Key {
			case "vcs.revision":
				info.Revision = s.Value
			case "vcs.time":
				info.Time = s.Value
			case "vcs.modified":
				info.Modified = s.Value == "true"
			}
		}
	})
	return info
}

// String is the one-line form --version prints after the program name:
// "v1.2.0 (revision 1a2b3c4d5e6f, 2026-01-02T03:04:05Z) go1.26.8".
func (i Info) String() string {
	rev := i.Revision
	if i.Modified {
		rev += "+modified"
	}
	return fmt.Sprintf("%s (revision %s, %s) %s %s/%s", i.Version, rev, i.Time, i.GoVersion, runtime.GOOS, runtime.GOARCH)
}

// Register adds chat_build_info (always 1; the labels carry the
// information, joined onto other series by instance) to reg.
func Register(reg prometheus.Registerer) {
	i := Get()
	g := prometheus.NewGauge(prometheus.GaugeOpts{
		Name:        "chat_build_info",
		Help:        "Build of the running chatd: always 1, the labels say which (version, revision, goversion).",
		ConstLabels: prometheus.Labels{"version": i.Version, "revision": i.Revision, "goversion": i.GoVersion},
	})
	g.Set(1)
	reg.MustRegister(g)
}

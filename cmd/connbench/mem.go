package main

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"net/http"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/chatd/chatd/internal/benchstat"
)

// Mem is the server's memory at the end of a step, after a forced
// garbage collection.
type Mem struct {
	HeapLiveMiB  float64 `json:"heapLiveMiB"`  // go_memstats_heap_alloc_bytes: live objects
	HeapInuseMiB float64 `json:"heapInuseMiB"` // go_memstats_heap_inuse_bytes: spans holding them
	StackMiB     float64 `json:"stackMiB"`     // go_memstats_stack_inuse_bytes
	Goroutines   float64 `json:"goroutines"`
	RSSMiB       float64 `json:"rssMiB"`
	OpenFiles    int     `json:"openFiles"`
	PGPSSMiB     float64 `json:"pgPssMiB,omitempty"` // PostgreSQL: postmaster and backends
}

// PerClient is a step's memory less the baseline's, per client.
type PerClient struct {
	HeapInuseKiB float64 `json:"heapInuseKiB"`
	HeapLiveKiB  float64 `json:"heapLiveKiB"`
	StackKiB     float64 `json:"stackKiB"`
	TotalKiB     float64 `json:"totalKiB"` // heap in use + stacks: the figure
	Goroutines   float64 `json:"goroutines"`
	RSSKiB       float64 `json:"rssKiB"`
	PGPSSKiB     float64 `json:"pgPssKiB,omitempty"`
}

func (m Mem) perClient(base Mem, n int) *PerClient {
	k := func(now, then float64) float64 { return round1((now - then) * 1024 / float64(n)) }
	p := &PerClient{
		HeapInuseKiB: k(m.HeapInuseMiB, base.HeapInuseMiB),
		HeapLiveKiB:  k(m.HeapLiveMiB, base.HeapLiveMiB),
		StackKiB:     k(m.StackMiB, base.StackMiB),
		Goroutines:   round1((m.Goroutines - base.Goroutines) / float64(n)),
		RSSKiB:       k(m.RSSMiB, base.RSSMiB),
	}
	p.TotalKiB = round1(p.HeapInuseKiB + p.StackKiB)
	if m.PGPSSMiB > 0 {
		p.PGPSSKiB = k(m.PGPSSMiB, base.PGPSSMiB)
	}
	return p
}

func round1(x float64) float64 { return float64(int64(x*10+0.5*sign(x))) / 10 }

func sign(x float64) float64 {
	if x < 0 {
		return -1
	}
	return 1
}

type memSampler struct {
	o  *options
	hc *http.Client
}

func newMemSampler(o *options) (*memSampler, error) {
	m := &memSampler{o: o, hc: &http.Client{Timeout: 60 * time.Second}}
	if o.serverPID > 0 {
		if _, err := benchstat.RSS(o.serverPID); err != nil {
			return nil, fmt.Errorf("-server-pid %d: %w", o.serverPID, err)
		}
	}
	if _, err := m.scrape(context.Background()); err != nil {
		return nil, err
	}
	return m, nil
}

// sample collects garbage in the server (pprof), then reads its figures.
func (m *memSampler) sample(ctx context.Context, step string) Mem {
	var out Mem
	if m.o.pprofURL != "" {
		for i := range m.o.gcs {
			body, err := m.get(ctx, m.o.pprofURL+"/debug/pprof/heap?gc=1")
			if err == nil && m.o.profileDir != "" && i == m.o.gcs-1 {
				_ = saveProfile(m.o.profileDir, fmt.Sprintf("%s-%s.heap.pb.gz", m.o.target(), step), body)
			}
		}
	}
	if v, err := m.scrape(ctx); err == nil {
		out.HeapLiveMiB = v["go_memstats_heap_alloc_bytes"] / (1 << 20)
		out.HeapInuseMiB = v["go_memstats_heap_inuse_bytes"] / (1 << 20)
		out.StackMiB = v["go_memstats_stack_inuse_bytes"] / (1 << 20)
		out.Goroutines = v["go_goroutines"]
	}
	if m.o.serverPID > 0 {
		if rss, err := benchstat.RSS(m.o.serverPID); err == nil {
			out.RSSMiB = rss / (1 << 20)
		}
		out.OpenFiles = m.openFiles()
	}
	if m.o.pgPID > 0 {
		if pss, err := benchstat.TreePSS(m.o.pgPID); err == nil {
			out.PGPSSMiB = pss / (1 << 20)
		}
	}
	return out
}

func (m *memSampler) get(ctx context.Context, url string) ([]byte, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return nil, err
	}
	// The node's own variable: a node with metrics_token answers 401
	// to a scrape without it.
	if t := os.Getenv("CHAT_METRICS_TOKEN"); t != "" {
		req.Header.Set("Authorization", "Bearer "+t)
	}
	resp, err := m.hc.Do(req)
	if err != nil {
		return nil, fmt.Errorf("get %s: %w", url, err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		return nil, fmt.Errorf("get %s: %w", url, err)
	}
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("get %s: %s", url, resp.Status)
	}
	return body, nil
}

// scrape reads the Go runtime's gauges from the server's /metrics.
func (m *memSampler) scrape(ctx context.Context) (map[string]float64, error) {
	return m.read(ctx, false)
}

// scrapeAll reads every unlabelled series of the server's /metrics.
func (m *memSampler) scrapeAll(ctx context.Context) (map[string]float64, error) {
	return m.read(ctx, true)
}

func (m *memSampler) read(ctx context.Context, all bool) (map[string]float64, error) {
	body, err := m.get(ctx, m.o.metricsURL)
	if err != nil {
		return nil, fmt.Errorf("read the server's metrics: %w", err)
	}
	out := map[string]float64{}
	sc := bufio.NewScanner(strings.NewReader(string(body)))
	sc.Buffer(make([]byte, 64*1024), 1<<20)
	for sc.Scan() {
		name, val, ok := strings.Cut(sc.Text(), " ")
		if !ok || !(all || strings.HasPrefix(name, "go_memstats_") || name == "go_goroutines") {
			continue
		}
		if v, err := strconv.ParseFloat(strings.TrimSpace(val), 64); err == nil {
			out[name] = v
		}
	}
	if _, ok := out["go_memstats_heap_inuse_bytes"]; !ok {
		return nil, fmt.Errorf("read the server's metrics: no go_memstats_heap_inuse_bytes at %s", m.o.metricsURL)
	}
	return out, nil
}

func (m *memSampler) openFiles() int {
	if m.o.serverPID <= 0 {
		return 0
	}
	ents, err := os.ReadDir(fmt.Sprintf("/proc/%d/fd", m.o.serverPID))
	if err != nil {
		return 0
	}
	return len(ents)
}

// waitIdle waits until the server reports no MQTT connection and runs no
// more goroutines than before the first connection (give or take a few
// that come and go): every disconnected session has been put away.
func (m *memSampler) waitIdle(ctx context.Context, baseGoroutines float64) error {
	gauge, others := "chat_mqtt_connections", 0.0
	if m.o.plain {
		// The publisher of the offline messages stays connected.
		gauge, others = "plainbroker_clients_connected", 1
	}
	t := time.NewTicker(50 * time.Millisecond)
	defer t.Stop()
	for {
		v, err := m.scrapeAll(ctx)
		if err == nil {
			conns, ok := v[gauge]
			if !ok {
				return fmt.Errorf("the server's metrics have no %s", gauge)
			}
			if conns <= others && v["go_goroutines"] <= baseGoroutines+32 {
				return nil
			}
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("the server still reports %.0f connections and %.0f goroutines (%.0f before the first connection)", v[gauge], v["go_goroutines"], baseGoroutines)
		case <-t.C:
		}
	}
}

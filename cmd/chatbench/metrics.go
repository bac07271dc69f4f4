package main

import (
	"bufio"
	"context"
	"fmt"
	"net/http"
	"os"
	"strconv"
	"strings"
	"time"
)

// scrapeMetrics reads chatd's /metrics and sums every chat_* counter-like
// series (…_total, …_sum, …_count) over its labels.
func scrapeMetrics(ctx context.Context, url string) (map[string]float64, error) {
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return nil, err
	}
	// The node's own variable: a node with metrics_token answers 401
	// to a scrape without it.
	if t := os.Getenv("CHAT_METRICS_TOKEN"); t != "" {
		req.Header.Set("Authorization", "Bearer "+t)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return nil, fmt.Errorf("scrape %s: %w", url, err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("scrape %s: %s", url, resp.Status)
	}
	out := map[string]float64{}
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 64*1024), 1<<20)
	for sc.Scan() {
		line := sc.Text()
		if !strings.HasPrefix(line, "chat_") {
			continue
		}
		name, rest, ok := strings.Cut(line, " ")
		if i := strings.IndexByte(name, '{'); i >= 0 {
			name = name[:i]
			_, rest, ok = strings.Cut(line, "} ")
		}
		if !ok || strings.HasSuffix(name, "_bucket") ||
			!(strings.HasSuffix(name, "_total") || strings.HasSuffix(name, "_sum") || strings.HasSuffix(name, "_count")) {
			continue
		}
		v, err := strconv.ParseFloat(strings.Fields(rest)[0], 64)
		if err != nil {
			continue
		}
		out[name] += v
	}
	return out, sc.Err()
}

// ServerMetrics are what chatd's own metrics say about the run: deltas of
// its counters between the start of sending and the end of the drain.
type ServerMetrics struct {
	Deltas map[string]float64 `json:"deltas"`
	// Derived figures (0 when the metric is absent).
	SendAvgMs           float64 `json:"sendAvgMs"`           // chat_send_seconds: the send transaction
	DeliveryAvgMs       float64 `json:"deliveryAvgMs"`       // chat_delivery_latency_seconds: commit -> PUBACK of the delivery
	PoolAcquireWaitSecs float64 `json:"poolAcquireWaitSecs"` // chat_pg_pool_acquire_wait_seconds_total
	QueueOverflows      float64 `json:"queueOverflows"`      // chat_delivery_queue_overflows_total
	Replayed            float64 `json:"replayed"`            // chat_delivery_replayed_total: read back from PostgreSQL
}

func metricDeltas(before, after map[string]float64) *ServerMetrics {
	d := map[string]float64{}
	for k, v := range after {
		if x := v - before[k]; x != 0 {
			d[k] = x
		}
	}
	avg := func(name string) float64 {
		if n := d[name+"_count"]; n > 0 {
			return 1000 * d[name+"_sum"] / n
		}
		return 0
	}
	return &ServerMetrics{
		Deltas:              d,
		SendAvgMs:           avg("chat_send_seconds"),
		DeliveryAvgMs:       avg("chat_delivery_latency_seconds"),
		PoolAcquireWaitSecs: d["chat_pg_pool_acquire_wait_seconds_total"],
		QueueOverflows:      d["chat_delivery_queue_overflows_total"],
		Replayed:            d["chat_delivery_replayed_total"],
	}
}

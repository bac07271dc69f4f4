package server

import (
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/chatd/chatd/store"
)

// desc describes an unlabelled metric that a collector reads at scrape
// time.
func desc(name, help string) *prometheus.Desc { return prometheus.NewDesc(name, help, nil, nil) }

// poolCollector exposes pgxpool statistics at scrape time.
type poolCollector struct {
	pool                                     *pgxpool.Pool
	total, idle, acquired, max, acquireCount *prometheus.Desc
	acquireWait                              *prometheus.Desc
}

func newPoolCollector(p *pgxpool.Pool) *poolCollector {
	return &poolCollector{
		pool:         p,
		total:        desc("chat_pg_pool_conns", "Open PostgreSQL connections."),
		idle:         desc("chat_pg_pool_idle_conns", "Idle PostgreSQL connections."),
		acquired:     desc("chat_pg_pool_acquired_conns", "PostgreSQL connections in use."),
		max:          desc("chat_pg_pool_max_conns", "PostgreSQL pool size."),
		acquireCount: desc("chat_pg_pool_acquires_total", "Connections acquired from the pool."),
		acquireWait:  desc("chat_pg_pool_acquire_wait_seconds_total", "Time spent waiting for a pool connection."),
	}
}

func (c *poolCollector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{c.total, c.idle, c.acquired, c.max, c.acquireCount, c.acquireWait} {
		ch <- d
	}
}

func (c *poolCollector) Collect(ch chan<- prometheus.Metric) {
	st := c.pool.Stat()
	ch <- prometheus.MustNewConstMetric(c.total, prometheus.GaugeValue, float64(st.TotalConns()))
	ch <- prometheus.MustNewConstMetric(c.idle, prometheus.GaugeValue, float64(st.IdleConns()))
	ch <- prometheus.MustNewConstMetric(c.acquired, prometheus.GaugeValue, float64(st.AcquiredConns()))
	ch <- prometheus.MustNewConstMetric(c.max, prometheus.GaugeValue, float64(st.MaxConns()))
	ch <- prometheus.MustNewConstMetric(c.acquireCount, prometheus.CounterValue, float64(st.AcquireCount()))
	ch <- prometheus.MustNewConstMetric(c.acquireWait, prometheus.CounterValue, st.AcquireDuration().Seconds())
}

// sendBatchCollector exposes group commit's counters at scrape time: their
// ratio is the average number of sends per transaction, which shows how
// much batching the load gets (1 on an idle server, up to 256 when
// PostgreSQL is the bottleneck).
type sendBatchCollector struct {
	stats                     func() store.BatchStats
	batches, messages, queued *prometheus.Desc
}

func newSendBatchCollector(stats func() store.BatchStats) *sendBatchCollector {
	return &sendBatchCollector{
		stats:    stats,
		batches:  desc("chat_send_batches_total", "Group-commit transactions run for sends (a retry of a failed batch one send at a time counts each)."),
		messages: desc("chat_send_batched_total", "Sends processed by group-commit transactions."),
		queued:   desc("chat_send_queued", "Sends waiting for a group-commit transaction now."),
	}
}

func (c *sendBatchCollector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{c.batches, c.messages, c.queued} {
		ch <- d
	}
}

func (c *sendBatchCollector) Collect(ch chan<- prometheus.Metric) {
	st := c.stats()
	ch <- prometheus.MustNewConstMetric(c.batches, prometheus.CounterValue, float64(st.Batches))
	ch <- prometheus.MustNewConstMetric(c.messages, prometheus.CounterValue, float64(st.Messages))
	ch <- prometheus.MustNewConstMetric(c.queued, prometheus.GaugeValue, float64(st.Queued))
}

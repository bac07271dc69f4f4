// Package promreg registers a package's Prometheus metrics the one way
// chatd's packages do it: all of them or none, and not at all without a
// registry (tests, tools), where the metrics still count and nobody
// scrapes them.
package promreg

import "github.com/prometheus/client_golang/prometheus"

// Register registers cs on reg, all or none: after a failure (a name
// already taken) it unregisters those it registered, so a caller that
// gives up leaves reg as it found it. A nil reg registers nothing.
func Register(reg prometheus.Registerer, cs ...prometheus.Collector) error {
	if reg == nil {
		return nil
	}
	for i, c := range cs {
		if err := reg.Register(c); err != nil {
			for _, done := range cs[:i] {
				reg.Unregister(done)
			}
			return err
		}
	}
	return nil
}

// Counter is a counter with only a name and help, as most of chatd's are.
func Counter(name, help string) prometheus.Counter {
	return prometheus.NewCounter(prometheus.CounterOpts{Name: name, Help: help})
}

// Gauge is a gauge with only a name and help.
func Gauge(name, help string) prometheus.Gauge {
	return prometheus.NewGauge(prometheus.GaugeOpts{Name: name, Help: help})
}

// CounterVec is a counter with a name and help, labelled by labels.
func CounterVec(name, help string, labels ...string) *prometheus.CounterVec {
	return prometheus.NewCounterVec(prometheus.CounterOpts{Name: name, Help: help}, labels)
}

package promreg_test

import (
	"testing"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/chatd/chatd/internal/promreg"
)

// A set of metrics one of which is already registered registers none of
// them: the caller that fails leaves the registry as it was, and may try
// again once the name is free.
func TestRegisterRegistersAllOrNone(t *testing.T) {
	reg := prometheus.NewRegistry()
	taken := prometheus.NewCounter(prometheus.CounterOpts{Name: "taken_total", Help: "h"})
	if err := promreg.Register(reg, taken); err != nil {
		t.Fatal(err)
	}
	fresh := prometheus.NewCounter(prometheus.CounterOpts{Name: "fresh_total", Help: "h"})
	again := prometheus.NewCounter(prometheus.CounterOpts{Name: "taken_total", Help: "h"})
	if err := promreg.Register(reg, fresh, again); err == nil {
		t.Fatal("registered a name already taken")
	}
	if err := promreg.Register(reg, fresh); err != nil {
		t.Fatalf("fresh_total stayed registered after the set failed: %v", err)
	}
	if err := promreg.Register(nil, again); err != nil {
		t.Fatalf("without a registry: %v", err)
	}
}

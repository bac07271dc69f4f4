package main

import (
	"fmt"
	"io"
	"text/tabwriter"
)

// Report is a run's outcome.
type Report struct {
	Target       string  `json:"target"` // chatd or plain
	Clients      int     `json:"clients"`
	ConnectRate  float64 `json:"connectRate"`
	Sources      int     `json:"sourceAddresses"`
	SetupSeconds float64 `json:"setupSeconds,omitempty"`
	Steps        []Step  `json:"steps"`
	Lost         int64   `json:"lost"`       // clients missing a message they were owed
	Duplicates   int64   `json:"duplicates"` // repeated deliveries (at least once allows them)
	OK           bool    `json:"ok"`         // every step in its time, nothing lost
}

// Step is one step with the server's memory after it.
type Step struct {
	Name      string     `json:"name"`
	What      string     `json:"what"`
	Seconds   float64    `json:"seconds"`
	OK        bool       `json:"ok"`
	Detail    string     `json:"detail,omitempty"`
	Error     string     `json:"error,omitempty"`
	Mem       Mem        `json:"mem"`
	PerClient *PerClient `json:"perClient,omitempty"` // less the baseline (or PerClientOf), per client
	// PerClientOf names the step PerClient is measured from when not the
	// baseline.
	PerClientOf string `json:"perClientOf,omitempty"`
}

func (r *Report) print(w io.Writer) {
	fmt.Fprintf(w, "connbench: %s, %d persistent MQTT v5 sessions from %d source addresses, connect rate %.0f/s\n", r.Target, r.Clients, r.Sources, r.ConnectRate)
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "step\tseconds\tok\theap inuse MiB\tlive MiB\tstacks MiB\tgoroutines\tRSS MiB\tPG PSS MiB\t| per client: heap+stack KiB\theap KiB\tstack KiB\tgoroutines\tRSS KiB\tPG KiB")
	for _, s := range r.Steps {
		m := s.Mem
		fmt.Fprintf(tw, "%s\t%.1f\t%v\t%.1f\t%.1f\t%.1f\t%.0f\t%.0f\t%.0f\t|", s.Name, s.Seconds, s.OK, m.HeapInuseMiB, m.HeapLiveMiB, m.StackMiB, m.Goroutines, m.RSSMiB, m.PGPSSMiB)
		if p := s.PerClient; p != nil {
			fmt.Fprintf(tw, " %.1f\t%.1f\t%.1f\t%.1f\t%.1f\t%.1f", p.TotalKiB, p.HeapInuseKiB, p.StackKiB, p.Goroutines, p.RSSKiB, p.PGPSSKiB)
			if s.PerClientOf != "" {
				fmt.Fprintf(tw, "\t(less %s)", s.PerClientOf)
			}
		}
		fmt.Fprintln(tw)
	}
	_ = tw.Flush()
	for _, s := range r.Steps {
		if s.Detail != "" || s.Error != "" {
			fmt.Fprintf(w, "  %s: %s", s.Name, s.Detail)
			if s.Error != "" {
				fmt.Fprintf(w, " ERROR: %s", s.Error)
			}
			fmt.Fprintln(w)
		}
	}
	fmt.Fprintf(w, "lost %d, duplicates %d; ok %v\n", r.Lost, r.Duplicates, r.OK)
}

//go:build windows

package pgembed

import "context"

// Cluster stands in for the embedded cluster, which needs a unix system
// (errNoEmbedded): it is never made, so what uses it (pgtest, chatctl's
// tests) compiles here and says why it cannot run.
type Cluster struct{ opts Options }

// Start fails: see Cluster.
func Start(context.Context, Options) (*Cluster, error) { return nil, errNoEmbedded }

// New fails: see Cluster.
func New(Options) (*Cluster, error) { return nil, errNoEmbedded }

// Start fails: see Cluster.
func (c *Cluster) Start(context.Context) error { return errNoEmbedded }

// SocketPath is empty: no server, no socket.
func (c *Cluster) SocketPath() string { return "" }

// URL is empty: no server to connect to.
func (c *Cluster) URL(string) string { return "" }

// CreateDatabase fails: see Cluster.
func (c *Cluster) CreateDatabase(context.Context, string) error { return errNoEmbedded }

// Exited is nil: no postmaster was started.
func (c *Cluster) Exited() <-chan struct{} { return nil }

// Stop has nothing to stop.
func (c *Cluster) Stop(context.Context, bool) error { return nil }

// DataDir is the cluster's PGDATA.
func (c *Cluster) DataDir() string { return c.opts.DataDir }

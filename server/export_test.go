package server

import "time"

// WithBodyTimeout gives request bodies d to arrive instead of
// requestBodyTimeout (60 s).
func WithBodyTimeout(d time.Duration) Option { return func(s *Server) { s.bodyTimeout = d } }

// WithoutTakeoverWatch starts a node that is not told when a connection on
// another node takes one of its sessions over, as when that notice is late
// or lost: the old connection stays open meanwhile.
func WithoutTakeoverWatch() Option { return func(s *Server) { s.noTakeoverWatch = true } }

// ObjectStoreOrigin is what the web client's Content-Security-Policy
// lets the page connect to besides its own origin.
var ObjectStoreOrigin = objectStoreOrigin

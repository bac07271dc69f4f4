//go:build !linux

package httpapi

import "net"

// bytesAcked is nil: only Linux's TCP_INFO is read.
func bytesAcked(*net.TCPConn) func() (uint64, bool) { return nil }

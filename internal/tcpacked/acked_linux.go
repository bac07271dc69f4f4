package tcpacked

import (
	"net"

	"golang.org/x/sys/unix"
)

// bytesAcked reads tcpi_bytes_acked of c (TCP_INFO).
func bytesAcked(c *net.TCPConn) (uint64, bool) {
	rc, err := c.SyscallConn()
	if err != nil {
		return 0, false
	}
	var info *unix.TCPInfo
	var ierr error
	if err := rc.Control(func(fd uintptr) { info, ierr = unix.GetsockoptTCPInfo(int(fd), unix.IPPROTO_TCP, unix.TCP_INFO) }); err != nil || ierr != nil {
		return 0, false
	}
	return info.Bytes_acked, true
}

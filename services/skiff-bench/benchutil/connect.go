package benchutil

import (
	"fmt"
	"net/netip"
	"time"

	"golang.org/x/sys/unix"
)

// ConnectLatency times blocking TCP connects to dst with plain syscalls (no
// Go poller in the measurement), each closed with RST so no TIME_WAIT piles
// up. It must run on the thread whose namespace (and cgroup) is measured.
func ConnectLatency(dst netip.AddrPort, n int) (p50, p99 time.Duration, err error) {
	sa := &unix.SockaddrInet4{Addr: dst.Addr().As4(), Port: int(dst.Port())}
	lat := make([]time.Duration, 0, n)
	for i := range n + n/10 { // the first tenth warms caches and is dropped
		fd, err := unix.Socket(unix.AF_INET, unix.SOCK_STREAM|unix.SOCK_CLOEXEC, 0)
		if err != nil {
			return 0, 0, err
		}
		// Fail instead of hanging if nothing translated the address or a policy drops it.
		tv := unix.NsecToTimeval((2 * time.Second).Nanoseconds())
		_ = unix.SetsockoptTimeval(fd, unix.SOL_SOCKET, unix.SO_SNDTIMEO, &tv)
		start := time.Now()
		err = unix.Connect(fd, sa)
		d := time.Since(start)
		_ = unix.SetsockoptLinger(fd, unix.SOL_SOCKET, unix.SO_LINGER, &unix.Linger{Onoff: 1, Linger: 0})
		unix.Close(fd)
		if err != nil {
			return 0, 0, fmt.Errorf("connect %v: %w", dst, err)
		}
		if i >= n/10 {
			lat = append(lat, d)
		}
	}
	p50, p99 = Percentiles(lat)
	return p50, p99, nil
}

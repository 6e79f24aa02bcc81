package cgrouptest

import (
	"bufio"
	"fmt"
	"net"
	"strings"
	"time"

	"golang.org/x/sys/unix"
)

// LoopbackUp brings up lo in this process's network namespace (a new one starts with it down).
func LoopbackUp() error {
	fd, err := unix.Socket(unix.AF_INET, unix.SOCK_DGRAM|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		return err
	}
	defer unix.Close(fd)
	ifr, err := unix.NewIfreq("lo")
	if err != nil {
		return err
	}
	if err := unix.IoctlIfreq(fd, unix.SIOCGIFFLAGS, ifr); err != nil {
		return err
	}
	ifr.SetUint16(ifr.Uint16() | unix.IFF_UP)
	return unix.IoctlIfreq(fd, unix.SIOCSIFFLAGS, ifr)
}

// EchoTCP answers every connection ln accepts with name and a newline, until ln is closed.
func EchoTCP(ln net.Listener, name string) {
	for {
		c, err := ln.Accept()
		if err != nil {
			return
		}
		fmt.Fprintln(c, name)
		c.Close()
	}
}

// EchoUDP answers every datagram pc receives with name, until pc is closed.
func EchoUDP(pc net.PacketConn, name string) {
	buf := make([]byte, 256)
	for {
		_, from, err := pc.ReadFrom(buf)
		if err != nil {
			return
		}
		_, _ = pc.WriteTo([]byte(name), from)
	}
}

// TCPOnce connects to addr and reads the one line an echo backend sends, and the peer the
// socket reports; timeout bounds the connect and the read.
func TCPOnce(addr string, timeout time.Duration) (body, peer string, err error) {
	c, err := net.DialTimeout("tcp", addr, timeout)
	if err != nil {
		return "", "", err
	}
	defer c.Close()
	_ = c.SetDeadline(time.Now().Add(timeout))
	line, err := bufio.NewReader(c).ReadString('\n')
	return strings.TrimSpace(line), c.RemoteAddr().String(), err
}

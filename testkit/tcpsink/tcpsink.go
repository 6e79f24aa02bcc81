// Package tcpsink is a TCP listener that accepts and closes every connection: a peer for
// tests and benches that count connects (through or dropped), never a full backlog.
package tcpsink

import "net"

// Listen listens on IPv4 TCP addr and accepts and closes connections until the listener is
// closed.
func Listen(addr string) (net.Listener, error) {
	ln, err := net.Listen("tcp4", addr)
	if err != nil {
		return nil, err
	}
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			c.Close()
		}
	}()
	return ln, nil
}

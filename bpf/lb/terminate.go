package lb

import (
	"fmt"
	"io"

	"github.com/skiff-sh/skiff/internal/netnsexec"
)

// TerminateStaleUDP aborts connected UDP sockets that reached a backend
// through a Service which no longer contains that backend. Connected UDP
// never re-enters sendmsg, so this is the only way such a socket moves on:
// its next call fails with ECONNABORTED and a reconnect re-selects.
// BPF socket iterators only see the network namespace they are opened in:
// netnsPath "" means the calling thread's; pods in their own namespace need
// one call each (Upsert and Delete already cover the caller's namespace).
func (d *Dataplane) TerminateStaleUDP(netnsPath string) error {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.closed {
		return errClosed
	}
	return d.terminate(netnsPath)
}

func (d *Dataplane) terminate(netnsPath string) error {
	if d.term == nil {
		return d.termErr
	}
	rd, err := d.openIter(netnsPath)
	if err != nil {
		return fmt.Errorf("lb: terminate stale UDP sockets: %w", err)
	}
	defer rd.Close()
	// The iterator does its work while being read.
	if _, err := io.Copy(io.Discard, rd); err != nil {
		return fmt.Errorf("lb: terminate stale UDP sockets: %w", err)
	}
	return nil
}

func (d *Dataplane) openIter(netnsPath string) (io.ReadCloser, error) {
	if netnsPath == "" {
		return d.term.Open()
	}
	// The namespace is bound when the iterator is opened.
	var rd io.ReadCloser
	var openErr error
	if err := netnsexec.Run(netnsPath, func() { rd, openErr = d.term.Open() }); err != nil {
		if rd != nil {
			rd.Close()
		}
		return nil, err
	}
	return rd, openErr
}

package stream

import (
	"bytes"
	"crypto/rand"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"sync"
	"time"

	"github.com/nats-io/nats.go"
)

const (
	// Channels is how many byte channels a session has: stdin, stdout, stderr, and two spare
	// (the channel numbers of Kubernetes' remote command protocol; port-forward uses 0).
	Channels = 5
	// Window is how many bytes one side may send before the other has read them. It bounds a
	// session's buffer on each side, so NATS never holds more than this per direction.
	Window = 256 << 10
	// maxChunk bounds one Data frame.
	maxChunk = 32 << 10
	// creditEvery: a reader grants credit back once it has read this much.
	creditEvery = Window / 4
)

// pingEvery and idleLimit end a session whose peer went away without a word (a node or
// apiserver that died), so the other side does not hold a process or a socket forever.
var (
	pingEvery = 5 * time.Second
	idleLimit = 30 * time.Second
)

// ErrClosed is returned once the session was closed locally.
var ErrClosed = errors.New("stream: session closed")

// ExitStatus is how a session ended on the node.
type ExitStatus struct {
	Code    int32
	Message string
}

// Session is one end of a session: it publishes frames on out and receives them on in.
type Session struct {
	nc  *nats.Conn
	out string
	sub *nats.Subscription

	sendMu  sync.Mutex // assigns sequence numbers in publish order
	sendSeq uint64

	mu       sync.Mutex
	cond     *sync.Cond
	credit   int64 // bytes this side may still send
	inbound  int64 // bytes received and not yet read, at most Window
	unacked  int64 // bytes read and not yet credited back
	recvSeq  uint64
	bufs     [Channels]bytes.Buffer
	eof      [Channels]bool
	lastRecv time.Time
	exit     *ExitStatus
	err      error
	ended    bool
	done     chan struct{}
	resizes  chan Size
}

// NewID is a random session id, usable as a NATS subject token.
func NewID() string {
	b := make([]byte, 12)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}

// ValidID says whether id is one NewID could have made.
func ValidID(id string) bool {
	if len(id) != 24 {
		return false
	}
	_, err := hex.DecodeString(id)
	return err == nil
}

// Open starts a session that publishes on out and receives on in. The caller must Close it.
func Open(nc *nats.Conn, out, in string) (*Session, error) {
	s := &Session{nc: nc, out: out, credit: Window, lastRecv: time.Now(), done: make(chan struct{}), resizes: make(chan Size, 16)}
	s.cond = sync.NewCond(&s.mu)
	sub, err := nc.Subscribe(in, s.receive)
	if err != nil {
		return nil, err
	}
	// The window bounds what a well-behaved peer sends; these limits stop a broken one.
	_ = sub.SetPendingLimits(4*Window/maxChunk+64, 4*Window+64<<10)
	s.sub = sub
	go s.keepalive(pingEvery, idleLimit)
	return s, nil
}

// Done is closed when the session ended: an exit, a reset, a lost frame, an idle peer or Close.
func (s *Session) Done() <-chan struct{} { return s.done }

// Err is why the session ended; nil for a clean exit or while it runs.
func (s *Session) Err() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.err
}

// Exited is the node's exit status once it arrived.
func (s *Session) Exited() (ExitStatus, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.exit == nil {
		return ExitStatus{}, false
	}
	return *s.exit, true
}

// Resizes delivers the terminal sizes the peer sent; the oldest are dropped if unread.
func (s *Session) Resizes() <-chan Size { return s.resizes }

func (s *Session) receive(m *nats.Msg) {
	f, err := Decode(m.Data)
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.ended {
		return
	}
	switch {
	case err != nil:
		s.endLocked(err)
		return
	case f.Seq != s.recvSeq+1:
		s.endLocked(fmt.Errorf("stream: frame %d arrived after %d: frames were lost", f.Seq, s.recvSeq))
		return
	case f.Channel >= Channels:
		s.endLocked(fmt.Errorf("stream: channel %d does not exist", f.Channel))
		return
	}
	s.recvSeq, s.lastRecv = f.Seq, time.Now()
	switch f.Kind {
	case Data:
		if s.inbound += int64(len(f.Payload)); s.inbound > Window {
			s.endLocked(errors.New("stream: the peer sent more than its credit"))
			return
		}
		s.bufs[f.Channel].Write(f.Payload)
	case Close:
		s.eof[f.Channel] = true
	case Credit:
		s.credit += int64(binary.BigEndian.Uint32(f.Payload))
	case Resize:
		size := Size{binary.BigEndian.Uint16(f.Payload), binary.BigEndian.Uint16(f.Payload[2:])}
		select {
		case s.resizes <- size:
		default:
		}
	case Exit:
		s.exit = &ExitStatus{Code: int32(binary.BigEndian.Uint32(f.Payload)), Message: string(f.Payload[4:])}
		s.endLocked(nil)
	case Reset:
		s.endLocked(fmt.Errorf("stream: the peer ended the session: %s", f.Payload))
	}
	s.cond.Broadcast()
}

// endLocked ends the session once, keeping the first reason.
func (s *Session) endLocked(err error) {
	if s.ended {
		return
	}
	s.ended, s.err = true, err
	close(s.done)
	s.cond.Broadcast()
}

func (s *Session) send(kind Kind, ch byte, payload []byte) error {
	s.sendMu.Lock()
	defer s.sendMu.Unlock()
	s.sendSeq++
	return s.nc.Publish(s.out, Frame{Kind: kind, Channel: ch, Seq: s.sendSeq, Payload: payload}.Encode())
}

// Write sends p on channel ch, waiting for credit as the peer reads.
func (s *Session) Write(ch byte, p []byte) (int, error) {
	written := 0
	for len(p) > 0 {
		s.mu.Lock()
		for s.credit <= 0 && !s.ended {
			s.cond.Wait()
		}
		if s.ended {
			err := s.err
			s.mu.Unlock()
			if err == nil {
				err = ErrClosed
			}
			return written, err
		}
		n := int(min(int64(len(p)), s.credit, maxChunk))
		s.credit -= int64(n)
		s.mu.Unlock()
		if err := s.send(Data, ch, p[:n]); err != nil {
			return written, err
		}
		written += n
		p = p[n:]
	}
	return written, nil
}

// Read reads channel ch: io.EOF after the peer closed it or exited, the session's error if
// it broke.
func (s *Session) Read(ch byte, p []byte) (int, error) {
	s.mu.Lock()
	for s.bufs[ch].Len() == 0 && !s.eof[ch] && !s.ended {
		s.cond.Wait()
	}
	if s.bufs[ch].Len() == 0 {
		err := s.err
		s.mu.Unlock()
		if err == nil {
			err = io.EOF
		}
		return 0, err
	}
	n, _ := s.bufs[ch].Read(p)
	s.inbound -= int64(n)
	s.unacked += int64(n)
	var grant int64
	if s.unacked >= creditEvery {
		grant, s.unacked = s.unacked, 0
	}
	s.mu.Unlock()
	if grant > 0 {
		_ = s.send(Credit, 0, uint32Payload(uint32(grant)))
	}
	return n, nil
}

// CloseChannel tells the peer channel ch has no more bytes.
func (s *Session) CloseChannel(ch byte) error { return s.send(Close, ch, nil) }

// Resize sends a terminal size.
func (s *Session) Resize(size Size) error { return s.send(Resize, 0, resizePayload(size)) }

// Exit sends the exit status and ends the session on this side.
func (s *Session) Exit(st ExitStatus) error {
	err := s.send(Exit, 0, exitPayload(st.Code, st.Message))
	s.mu.Lock()
	s.exit = &st
	s.endLocked(nil)
	s.mu.Unlock()
	return err
}

// Close ends the session, telling a peer that still runs, and stops receiving.
func (s *Session) Close() {
	s.mu.Lock()
	running := !s.ended
	s.endLocked(ErrClosed)
	s.mu.Unlock()
	if running {
		_ = s.send(Reset, 0, []byte("closed"))
	}
	_ = s.sub.Unsubscribe()
}

// keepalive pings the peer and ends the session when the peer went silent. It lives as long
// as the session.
func (s *Session) keepalive(every, limit time.Duration) {
	t := time.NewTicker(every)
	defer t.Stop()
	for {
		select {
		case <-s.done:
			return
		case <-t.C:
		}
		s.mu.Lock()
		idle := time.Since(s.lastRecv)
		if idle > limit {
			s.endLocked(fmt.Errorf("stream: no word from the peer for %s", idle.Round(time.Second)))
		}
		ended := s.ended
		s.mu.Unlock()
		if ended {
			return
		}
		_ = s.send(Ping, 0, nil)
	}
}

// Reader and Writer adapt one channel to io.Reader and io.WriteCloser.
func (s *Session) Reader(ch byte) io.Reader      { return chanReader{s, ch} }
func (s *Session) Writer(ch byte) io.WriteCloser { return chanWriter{s, ch} }

type chanReader struct {
	s  *Session
	ch byte
}

func (r chanReader) Read(p []byte) (int, error) { return r.s.Read(r.ch, p) }

type chanWriter struct {
	s  *Session
	ch byte
}

func (w chanWriter) Write(p []byte) (int, error) { return w.s.Write(w.ch, p) }
func (w chanWriter) Close() error                { return w.s.CloseChannel(w.ch) }

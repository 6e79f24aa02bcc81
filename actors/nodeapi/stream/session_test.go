package stream

import (
	"bytes"
	"crypto/rand"
	"errors"
	"io"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/skiff-sh/skiff/bus/natsserver/natsservertest"
)

func natsConn(t *testing.T) *nats.Conn {
	_, nc := natsservertest.Start(t)
	return nc
}

// pair is two ends of one session on separate connections, as apiserver and node.
func pair(t *testing.T) (a, b *Session) {
	t.Helper()
	nc1 := natsConn(t)
	nc2, err := nats.Connect(nc1.ConnectedUrl())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(nc2.Close)
	a, err = Open(nc1, "t.ab", "t.ba")
	if err != nil {
		t.Fatal(err)
	}
	b, err = Open(nc2, "t.ba", "t.ab")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(a.Close)
	t.Cleanup(b.Close)
	// Both subscriptions are in the server before either end sends, as an open call makes sure.
	if err := nc1.Flush(); err != nil {
		t.Fatal(err)
	}
	if err := nc2.Flush(); err != nil {
		t.Fatal(err)
	}
	return a, b
}

// Many times the window crosses in order to a reader slower than the writer; the writer
// waits for credit instead of overrunning the reader (which would end the session).
func TestBytesCrossInOrderUnderFlowControl(t *testing.T) {
	a, b := pair(t)
	want := make([]byte, 8*Window+123)
	_, _ = rand.Read(want)
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		if _, err := a.Writer(1).Write(want); err != nil {
			t.Errorf("write: %v", err)
		}
		_ = a.CloseChannel(1)
	}()
	var got bytes.Buffer
	buf := make([]byte, 4096)
	for {
		n, err := b.Read(1, buf)
		got.Write(buf[:n])
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			t.Fatalf("read after %d bytes: %v", got.Len(), err)
		}
		if got.Len()%(Window/2) < 4096 {
			time.Sleep(5 * time.Millisecond) // a slow reader now and then
		}
	}
	wg.Wait()
	if !bytes.Equal(got.Bytes(), want) {
		t.Fatalf("got %d bytes, want %d, equal prefix: %v", got.Len(), len(want), bytes.HasPrefix(want, got.Bytes()))
	}
	if err := b.Err(); err != nil {
		t.Fatalf("session broke: %v", err)
	}
}

// The exit status ends the session after the output sent before it, which stays readable.
func TestExitAfterOutputAndResize(t *testing.T) {
	a, b := pair(t)
	if err := b.Resize(Size{Width: 132, Height: 43}); err != nil {
		t.Fatal(err)
	}
	select {
	case s := <-a.Resizes():
		if s != (Size{132, 43}) {
			t.Fatalf("resize: got %+v", s)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("no resize")
	}
	if _, err := a.Write(2, []byte("oops\n")); err != nil {
		t.Fatal(err)
	}
	if err := a.Exit(ExitStatus{Code: 3, Message: "exit status 3"}); err != nil {
		t.Fatal(err)
	}
	<-b.Done()
	st, ok := b.Exited()
	if !ok || st.Code != 3 || st.Message != "exit status 3" || b.Err() != nil {
		t.Fatalf("exit: %+v %v %v", st, ok, b.Err())
	}
	out, err := io.ReadAll(b.Reader(2))
	if err != nil || string(out) != "oops\n" {
		t.Fatalf("stderr after exit: %q %v", out, err)
	}
	if _, err := b.Write(0, []byte("late")); err == nil {
		t.Fatal("write after the exit succeeded")
	}
}

// A frame out of sequence (one lost in between) ends the session with that reason.
func TestLostFrameEndsTheSession(t *testing.T) {
	nc := natsConn(t)
	s, err := Open(nc, "t.out", "t.in")
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	_ = nc.Publish("t.in", Frame{Kind: Data, Channel: 1, Seq: 1, Payload: []byte("a")}.Encode())
	_ = nc.Publish("t.in", Frame{Kind: Data, Channel: 1, Seq: 3, Payload: []byte("c")}.Encode())
	<-s.Done()
	if err := s.Err(); err == nil || !strings.Contains(err.Error(), "lost") {
		t.Fatalf("err: %v", err)
	}
	if _, err := io.ReadAll(s.Reader(1)); err == nil {
		t.Fatal("a broken session's channel read to a clean EOF")
	}
}

// A peer that neither writes nor pings (its process died) ends the session.
func TestSilentPeerEndsTheSession(t *testing.T) {
	pingEvery, idleLimit = 20*time.Millisecond, 100*time.Millisecond
	t.Cleanup(func() { pingEvery, idleLimit = 5*time.Second, 30*time.Second })
	s, err := Open(natsConn(t), "t.nobody", "t.in")
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	select {
	case <-s.Done():
	case <-time.After(5 * time.Second):
		t.Fatal("session with a silent peer still open")
	}
	if err := s.Err(); err == nil || !strings.Contains(err.Error(), "no word") {
		t.Fatalf("err: %v", err)
	}
}

// Two channels written at once arrive whole and apart, sharing the window.
func TestChannelsStayApart(t *testing.T) {
	a, b := pair(t)
	want := map[byte][]byte{1: bytes.Repeat([]byte("o"), 3*Window), 2: bytes.Repeat([]byte("e"), 2*Window+7)}
	var wg sync.WaitGroup
	for ch, data := range want {
		wg.Go(func() {
			w := a.Writer(ch)
			if _, err := w.Write(data); err != nil {
				t.Errorf("write %d: %v", ch, err)
			}
			_ = w.Close()
		})
	}
	got := map[byte][]byte{}
	var mu sync.Mutex
	for ch := range want {
		wg.Go(func() {
			data, err := io.ReadAll(b.Reader(ch))
			if err != nil {
				t.Errorf("read %d: %v", ch, err)
			}
			mu.Lock()
			got[ch] = data
			mu.Unlock()
		})
	}
	wg.Wait()
	for ch, data := range want {
		if !bytes.Equal(got[ch], data) {
			t.Errorf("channel %d: %d bytes, want %d", ch, len(got[ch]), len(data))
		}
	}
}

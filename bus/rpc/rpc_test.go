package rpc

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/skiff-sh/skiff/bus/natsserver"
	"github.com/skiff-sh/skiff/bus/natsserver/natsservertest"
)

func conn(t *testing.T) (*natsserver.Server, *nats.Conn) { return natsservertest.Start(t) }

func TestCallHeadersAndErrors(t *testing.T) {
	_, nc := conn(t)
	_, err := Serve(nc, "svc.echo", "echo", func(ctx context.Context, subj string, data []byte, h nats.Header) ([]byte, nats.Header, error) {
		if _, ok := ctx.Deadline(); !ok {
			return nil, nil, errors.New("no deadline propagated")
		}
		switch string(data) {
		case "fail":
			return nil, nil, &Error{Code: "Conflict", Message: "stale"}
		case "plain":
			return []byte("partial"), nil, errors.New("boom")
		case "panic":
			panic("bad")
		}
		return append([]byte(subj+":"), data...), nats.Header{"Traceparent": {h.Get("Traceparent")}}, nil
	})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	data, h, err := Call(ctx, nc, "svc.echo", []byte("hi"), nats.Header{"Traceparent": {"00-1-2-01"}})
	if err != nil || string(data) != "svc.echo:hi" || h.Get("Traceparent") != "00-1-2-01" {
		t.Fatalf("call: %q %v %v", data, h, err)
	}
	var re *Error
	if _, _, err := Call(ctx, nc, "svc.echo", []byte("fail"), nil); !errors.As(err, &re) || re.Code != "Conflict" || re.Message != "stale" {
		t.Fatalf("coded error: %v", err)
	}
	if data, _, err := Call(ctx, nc, "svc.echo", []byte("plain"), nil); !errors.As(err, &re) || re.Message != "boom" || string(data) != "partial" {
		t.Fatalf("plain error: %q %v", data, err)
	}
	if _, _, err := Call(ctx, nc, "svc.echo", []byte("panic"), nil); !errors.As(err, &re) || re.Code != "Internal" {
		t.Fatalf("panic: %v", err)
	}
	if _, _, err := Call(ctx, nc, "svc.none", nil, nil); !errors.Is(err, ErrNoResponders) {
		t.Fatalf("no responders: %v", err)
	}
}

// Two replicas in one queue group share requests; each request is answered once.
func TestQueueGroupSharesLoad(t *testing.T) {
	s, nc := conn(t)
	var mu sync.Mutex
	served := map[string]int{}
	for _, name := range []string{"a", "b"} {
		rc, err := s.Connect()
		if err != nil {
			t.Fatal(err)
		}
		defer rc.Close()
		if _, err := Serve(rc, "svc.work", "workers", func(context.Context, string, []byte, nats.Header) ([]byte, nats.Header, error) {
			mu.Lock()
			served[name]++
			mu.Unlock()
			return []byte(name), nil, nil
		}); err != nil {
			t.Fatal(err)
		}
		if err := rc.Flush(); err != nil {
			t.Fatal(err)
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	const n = 200
	for i := range n {
		if _, _, err := Call(ctx, nc, "svc.work", []byte(fmt.Sprint(i)), nil); err != nil {
			t.Fatal(err)
		}
	}
	mu.Lock()
	defer mu.Unlock()
	if served["a"]+served["b"] != n || served["a"] == 0 || served["b"] == 0 {
		t.Fatalf("served %v", served)
	}
}

func TestHandlerSeesCallerDeadline(t *testing.T) {
	_, nc := conn(t)
	done := make(chan error, 1)
	Serve(nc, "svc.slow", "", func(ctx context.Context, _ string, _ []byte, _ nats.Header) ([]byte, nats.Header, error) {
		<-ctx.Done()
		done <- ctx.Err()
		return nil, nil, ctx.Err()
	})
	ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
	defer cancel()
	if _, _, err := Call(ctx, nc, "svc.slow", nil, nil); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("call: %v", err)
	}
	select {
	case err := <-done:
		if !errors.Is(err, context.DeadlineExceeded) {
			t.Fatalf("handler ctx: %v", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("handler never saw the deadline")
	}
}

// Requests run concurrently however many wait at once (a watch long-polls in its handler), and
// a handler that panicked leaves later requests served.
func TestHandlersRunConcurrentlyAfterReuse(t *testing.T) {
	_, nc := conn(t)
	const n = 40
	arrived := make(chan struct{}, n)
	release := make(chan struct{})
	_, err := Serve(nc, "svc.wait", "", func(ctx context.Context, _ string, data []byte, _ nats.Header) ([]byte, nats.Header, error) {
		switch string(data) {
		case "panic":
			panic("bad")
		case "wait":
			arrived <- struct{}{}
			<-release
		}
		return data, nil, nil
	})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	for range 5 { // goroutines that served these are idle, waiting for more
		if _, _, err := Call(ctx, nc, "svc.wait", []byte("x"), nil); err != nil {
			t.Fatal(err)
		}
	}
	if _, _, err := Call(ctx, nc, "svc.wait", []byte("panic"), nil); err == nil {
		t.Fatal("a panicking handler answered without an error")
	}
	var wg sync.WaitGroup
	errs := make(chan error, n)
	for range n {
		wg.Go(func() {
			if _, _, err := Call(ctx, nc, "svc.wait", []byte("wait"), nil); err != nil {
				errs <- err
			}
		})
	}
	for i := range n {
		select {
		case <-arrived:
		case <-ctx.Done():
			t.Fatalf("only %d of %d requests running at once", i, n)
		}
	}
	close(release)
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
}

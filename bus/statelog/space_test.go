package statelog

import (
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"
)

// A NATS server's own storage limit (max_file_store, what an external cluster's operator sets)
// refuses writes with ErrInsufficientStorage, which the apiserver answers with 507, rather
// than an opaque error; what was written before stays readable.
func TestServerStorageLimitIsInsufficientStorage(t *testing.T) {
	ns, err := server.NewServer(&server.Options{JetStream: true, StoreDir: t.TempDir(), JetStreamMaxStore: 256 << 10,
		DontListen: true, NoLog: true, NoSigs: true})
	if err != nil {
		t.Fatal(err)
	}
	go ns.Start()
	t.Cleanup(func() { ns.Shutdown(); ns.WaitForShutdown() })
	if !ns.ReadyForConnections(10 * time.Second) {
		t.Fatal("server not ready")
	}
	nc, err := nats.Connect("", nats.InProcessServer(ns))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(nc.Close)
	l, err := Open(ctx(t), nc, Config{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { l.Close() })
	value := []byte(strings.Repeat("x", 8<<10))
	written := 0
	for ; written < 1000; written++ {
		_, err = l.Create(ctx(t), fmt.Sprintf("k/%d", written), value, nil)
		if err != nil {
			break
		}
	}
	if !errors.Is(err, ErrInsufficientStorage) {
		t.Fatalf("after %d writes of 8 KiB under a 256 KiB limit: %v, want ErrInsufficientStorage", written, err)
	}
	if written == 0 {
		t.Fatal("the first write was refused")
	}
	if _, err := l.Get(ctx(t), "k/0", ReadOptions{}); err != nil {
		t.Fatalf("a write from before the limit: %v", err)
	}
}

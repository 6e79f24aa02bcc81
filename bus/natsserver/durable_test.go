package natsserver

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"
)

func fileStream(t *testing.T, s *Server, name string) jetstream.JetStream {
	t.Helper()
	nc, err := s.Connect()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(nc.Close)
	js, _ := jetstream.New(nc)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if _, err := js.CreateStream(ctx, jetstream.StreamConfig{Name: name, Subjects: []string{strings.ToLower(name) + ".>"}}); err != nil {
		t.Fatal(err)
	}
	return js
}

// Concurrent writers share fsync rounds, and a server that syncs nothing itself recovers
// every write after a restart.
func TestStreamSyncGroupCommit(t *testing.T) {
	dir := t.TempDir()
	s, err := Start(Config{DataDir: dir})
	if err != nil {
		t.Fatal(err)
	}
	js := fileStream(t, s, "G")
	y := s.StreamSync("G")
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	const writers, each = 32, 25
	var wg sync.WaitGroup
	errs := make(chan error, writers)
	for w := range writers {
		wg.Go(func() {
			for i := range each {
				if _, err := js.Publish(ctx, fmt.Sprintf("g.%d.%d", w, i), []byte("v")); err != nil {
					errs <- err
					return
				}
				if err := y.Sync(ctx); err != nil {
					errs <- err
					return
				}
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	rounds := y.Rounds()
	t.Logf("%d synced writes in %d fsync rounds", writers*each, rounds)
	if rounds == 0 || rounds >= writers*each/2 {
		t.Fatalf("%d writes took %d fsync rounds: not shared", writers*each, rounds)
	}
	s.Shutdown()

	s, err = Start(Config{DataDir: dir})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Shutdown()
	nc, _ := s.Connect()
	defer nc.Close()
	js, _ = jetstream.New(nc)
	st, err := js.Stream(ctx, "G")
	if err != nil {
		t.Fatal(err)
	}
	if n := st.CachedInfo().State.Msgs; n != writers*each {
		t.Fatalf("after restart: %d messages, want %d", n, writers*each)
	}
}

// Rounds follow the server onto new blocks: the kept descriptor is always the highest block.
func TestStreamSyncFollowsNewBlocks(t *testing.T) {
	s, err := Start(Config{DataDir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Shutdown()
	js := fileStream(t, s, "B")
	y := s.StreamSync("B")
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	big := make([]byte, 1<<20)
	for i := range 24 { // more than two blocks of the file store's default size
		if _, err := js.Publish(ctx, fmt.Sprintf("b.%d", i), big); err != nil {
			t.Fatal(err)
		}
		if err := y.Sync(ctx); err != nil {
			t.Fatal(err)
		}
	}
	blks, err := blocks(filepath.Join(y.dir, "msgs"))
	if err != nil {
		t.Fatal(err)
	}
	if len(blks) < 2 {
		t.Fatalf("blocks %v: the test needs the store to have moved to a new block", blks)
	}
	top, err := os.Stat(y.blockPath(blks[len(blks)-1]))
	if err != nil {
		t.Fatal(err)
	}
	if !os.SameFile(top, y.topInfo) {
		t.Fatalf("kept block %d, the highest is %v", y.lastBlk, blks)
	}
}

func TestStreamSyncErrors(t *testing.T) {
	s, err := Start(Config{DataDir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Shutdown()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := s.StreamSync("NOPE").Sync(ctx); err == nil || !strings.Contains(err.Error(), "NOPE") {
		t.Fatalf("sync of a missing stream: %v, want an error naming it", err)
	}
	fileStream(t, s, "C")
	y := s.StreamSync("C")
	if err := y.Sync(ctx); err != nil {
		t.Fatal(err)
	}
	_ = y.Close()
	if err := y.Sync(ctx); err == nil {
		t.Fatal("sync after Close succeeded")
	}
}

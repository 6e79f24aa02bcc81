package natsserver

import (
	"context"
	"os"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"
)

func TestStartInProcessAndTCP(t *testing.T) {
	for _, port := range []int{0, -1} {
		dir := t.TempDir()
		s, err := Start(Config{DataDir: dir, Port: port})
		if err != nil {
			t.Fatal(err)
		}
		if (s.ClientURL() == "") != (port == 0) {
			t.Fatalf("port %d: ClientURL %q", port, s.ClientURL())
		}
		nc, err := s.Connect()
		if err != nil {
			t.Fatal(err)
		}
		js, _ := jetstream.New(nc)
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		if _, err := js.CreateStream(ctx, jetstream.StreamConfig{Name: "T", Subjects: []string{"t.>"}}); err != nil {
			t.Fatal(err)
		}
		if _, err := js.Publish(ctx, "t.x", []byte("hi")); err != nil {
			t.Fatal(err)
		}
		cancel()
		nc.Close()
		s.Shutdown()
		if _, err := os.Stat(s.StoreDir()); err != nil {
			t.Fatalf("file store not in DataDir/jetstream: %v", err)
		}
	}
}

func TestTempStoreRemoved(t *testing.T) {
	s, err := Start(Config{})
	if err != nil {
		t.Fatal(err)
	}
	dir := s.StoreDir()
	s.Shutdown()
	if _, err := os.Stat(dir); !os.IsNotExist(err) {
		t.Fatalf("temp store %s still there: %v", dir, err)
	}
}

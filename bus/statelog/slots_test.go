package statelog

import (
	"bytes"
	"errors"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"
)

// Readers limited to a set of consumer names each take a free one; when all are held by live
// readers the next Open fails with ErrNoConsumerName, and closing a reader frees its name.
func TestConsumerNamesAreABudget(t *testing.T) {
	e := newEnv(t)
	w := e.open(Config{Memory: true})
	if _, err := w.Create(ctx(t), "a/x", []byte("1"), nil); err != nil {
		t.Fatal(err)
	}
	names := []string{"node_a_0", "node_a_1"}
	r0 := e.open(Config{Memory: true, ReadOnly: true, ConsumerNames: names})
	r1 := e.open(Config{Memory: true, ReadOnly: true, ConsumerNames: names})
	for _, r := range []*Log{r0, r1} {
		if got, err := r.Get(ctx(t), "a/x", ReadOptions{}); err != nil || string(got.Value) != "1" {
			t.Fatalf("reader's view: %v, %v", got, err)
		}
	}
	if _, err := Open(ctx(t), e.nc, Config{Memory: true, ReadOnly: true, ConsumerNames: names}); !errors.Is(err, ErrNoConsumerName) {
		t.Fatalf("third reader on two names: %v, want ErrNoConsumerName", err)
	}
	js, _ := jetstream.New(e.nc)
	st, _ := js.Stream(ctx(t), "STATE")
	for _, n := range names {
		if _, err := st.Consumer(ctx(t), n); err != nil {
			t.Fatalf("consumer %s of a live reader: %v", n, err)
		}
	}
	r1.Close()
	r2 := e.open(Config{Memory: true, ReadOnly: true, ConsumerNames: names})
	if got, err := r2.Get(ctx(t), "a/x", ReadOptions{}); err != nil || string(got.Value) != "1" {
		t.Fatalf("reader on the freed name: %v, %v", got, err)
	}
}

// A reader whose consumer is deleted under it recreates it under the same name, from where
// its view was, and misses nothing.
func TestSlotConsumerRecreatedAfterDelete(t *testing.T) {
	e := newEnv(t)
	w := e.open(Config{Memory: true})
	r := e.open(Config{Memory: true, ReadOnly: true, ConsumerNames: []string{"solo"}})
	watch, err := r.Watch(ctx(t), "a/", WatchOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer watch.Stop()
	js, _ := jetstream.New(e.nc)
	st, _ := js.Stream(ctx(t), "STATE")
	if _, err := w.Create(ctx(t), "a/0", []byte("0"), nil); err != nil {
		t.Fatal(err)
	}
	if ev := next(t, watch); ev.Key != "a/0" {
		t.Fatalf("first event %s", ev.Key)
	}
	if err := st.DeleteConsumer(ctx(t), "solo"); err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	for i := 1; i <= 3; i++ {
		if _, err := w.Create(ctx(t), "a/"+string(rune('0'+i)), []byte{byte('0' + i)}, nil); err != nil {
			t.Fatal(err)
		}
	}
	for i := 1; i <= 3; i++ {
		ev := next(t, watch)
		if want := []byte{byte('0' + i)}; !bytes.Equal(ev.Value, want) {
			t.Fatalf("event %d: %s=%q, want %q", i, ev.Key, ev.Value, want)
		}
	}
	t.Logf("view resumed %v after its consumer was deleted", time.Since(start).Round(time.Millisecond))
	if _, err := st.Consumer(ctx(t), "solo"); err != nil {
		t.Fatalf("consumer not recreated under its name: %v", err)
	}
}

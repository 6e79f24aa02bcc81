package statelog

import (
	"errors"
	"testing"

	"github.com/nats-io/nats.go/jetstream"
)

// A read-only Log never creates the stream and refuses every write before it reaches NATS.
func TestReadOnlyOpensButNeverCreatesOrWrites(t *testing.T) {
	e := newEnv(t)
	if _, err := Open(ctx(t), e.nc, Config{ReadOnly: true}); !errors.Is(err, jetstream.ErrStreamNotFound) {
		t.Fatalf("read-only open without a stream: %v, want ErrStreamNotFound", err)
	}
	js, err := jetstream.New(e.nc)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := js.Stream(ctx(t), "STATE"); !errors.Is(err, jetstream.ErrStreamNotFound) {
		t.Fatalf("a read-only open created the stream: %v", err)
	}
	w := e.open(Config{})
	rev, err := w.Create(ctx(t), "a/b", []byte("1"), nil)
	if err != nil {
		t.Fatal(err)
	}
	r := e.open(Config{ReadOnly: true})
	if got, err := r.Get(ctx(t), "a/b", ReadOptions{}); err != nil || string(got.Value) != "1" {
		t.Fatalf("read-only Get: %+v, %v", got, err)
	}
	if _, err := r.Create(ctx(t), "a/c", []byte("2"), nil); !errors.Is(err, ErrReadOnly) {
		t.Fatalf("Create: %v, want ErrReadOnly", err)
	}
	if _, err := r.Update(ctx(t), "a/b", []byte("2"), rev, nil); !errors.Is(err, ErrReadOnly) {
		t.Fatalf("Update: %v, want ErrReadOnly", err)
	}
	if _, err := r.Delete(ctx(t), "a/b", rev, nil); !errors.Is(err, ErrReadOnly) {
		t.Fatalf("Delete: %v, want ErrReadOnly", err)
	}
	if err := r.Compact(ctx(t), rev); !errors.Is(err, ErrReadOnly) {
		t.Fatalf("Compact: %v, want ErrReadOnly", err)
	}
	if w.Rev() != rev {
		t.Fatalf("the log moved to %d", w.Rev())
	}
}

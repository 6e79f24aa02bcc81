package identity_test

import (
	"context"
	"testing"
	"time"

	"github.com/skiff-sh/skiff/bus/identity"
	"github.com/skiff-sh/skiff/bus/identity/identitytest"
	"github.com/skiff-sh/skiff/bus/statelog"
)

// A node's permissions suffice for a view of some kinds (skiff dns): its consumer, filtered to
// their subjects, is created under the node's names, and what tells the view it has reached a
// revision of other kinds (the consumer's info) is granted, with no violation on the way.
func TestNodeOpensAFilteredView(t *testing.T) {
	ctx := context.Background()
	s := startSecured(t, t.TempDir())
	if _, err := s.log.Create(ctx, "core/services/default/web", []byte(`{}`), nil); err != nil {
		t.Fatal(err)
	}
	last, err := s.log.Create(ctx, "core/pods/default/p", []byte(`{}`), nil)
	if err != nil {
		t.Fatal(err)
	}
	v := &identitytest.Violations{}
	id := identity.NodeID("node-a")
	nc := connectCreds(t, s, id, v)
	rl, err := statelog.Open(ctx, nc, statelog.Config{ReadOnly: true, ConsumerNames: id.ConsumerNames(), Only: []string{"core/services/"}})
	if err != nil {
		t.Fatalf("filtered open with node credentials: %v", err)
	}
	defer rl.Close()
	if rl.Applied() < last {
		t.Fatalf("opened at %d, before the stream's last %d", rl.Applied(), last)
	}
	if _, err := s.log.Create(ctx, "core/pods/default/q", []byte(`{}`), nil); err != nil {
		t.Fatal(err)
	}
	rctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	if _, _, err := rl.List(rctx, "core/services/", statelog.ReadOptions{Consistent: true}); err != nil {
		t.Fatalf("consistent list: %v", err)
	}
	if n := v.Count(); n != 0 {
		t.Fatalf("permission violations: %v", v)
	}
}

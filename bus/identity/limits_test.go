package identity_test

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/skiff-sh/skiff/bus/identity"
	"github.com/skiff-sh/skiff/bus/identity/identitytest"
	"github.com/skiff-sh/skiff/bus/statelog"
)

func openView(ctx context.Context, nc *nats.Conn, id identity.ID) (*statelog.Log, error) {
	return statelog.Open(ctx, nc, statelog.Config{ReadOnly: true, ConsumerNames: id.ConsumerNames()})
}

// A node holds at most identity.ConsumerBudget consumers of the state stream: more views are
// refused, consumers under any other name cannot be created, and it can neither read from nor
// delete another node's. Another node still opens its view and sees every write.
func TestNodeConsumerBudget(t *testing.T) {
	ctx := context.Background()
	s := startSecured(t, t.TempDir())
	if _, err := s.log.Create(ctx, "pods/default/p0", []byte(`{}`), nil); err != nil {
		t.Fatal(err)
	}
	a, b := identity.NodeID("node-a"), identity.NodeID("node-b")
	va, vb := &identitytest.Violations{}, &identitytest.Violations{}
	nca, ncb := connectCreds(t, s, a, va), connectCreds(t, s, b, vb)

	bView, err := openView(ctx, ncb, b)
	if err != nil {
		t.Fatal(err)
	}
	defer bView.Close()
	for i := range identity.ConsumerBudget {
		l, err := openView(ctx, nca, a)
		if err != nil {
			t.Fatalf("view %d of %d: %v", i+1, identity.ConsumerBudget, err)
		}
		defer l.Close()
	}
	start := time.Now()
	if _, err := openView(ctx, nca, a); !errors.Is(err, statelog.ErrNoConsumerName) {
		t.Fatalf("view %d: %v, want ErrNoConsumerName", identity.ConsumerBudget+1, err)
	}
	t.Logf("view %d of node-a refused after %v", identity.ConsumerBudget+1, time.Since(start).Round(time.Millisecond))

	js, err := jetstream.New(s.nc)
	if err != nil {
		t.Fatal(err)
	}
	st, err := js.Stream(ctx, "STATE")
	if err != nil {
		t.Fatal(err)
	}
	count := func() int {
		n := 0
		for range st.ConsumerNames(ctx).Name() {
			n++
		}
		return n
	}
	before := count()
	// Every other way of making a consumer, and another node's consumer: refused by NATS.
	jsa, _ := jetstream.New(nca)
	short, cancel := context.WithTimeout(ctx, time.Second)
	defer cancel()
	if _, err := jsa.CreateConsumer(short, "STATE", jetstream.ConsumerConfig{Name: "node_a_extra", AckPolicy: jetstream.AckNonePolicy}); err == nil {
		t.Fatal("node-a created a consumer outside its names")
	}
	bName := b.ConsumerNames()[0]
	for _, subj := range []string{
		"$JS.API.CONSUMER.CREATE.STATE.node_a_extra",
		"$JS.API.CONSUMER.CREATE.STATE",              // server-named (ephemeral)
		"$JS.API.CONSUMER.DURABLE.CREATE.STATE.dur1", // durable, old API
		"$JS.API.CONSUMER.DELETE.STATE." + bName,
		"$JS.API.CONSUMER.MSG.NEXT.STATE." + bName,
		"$JS.API.CONSUMER.CREATE.STATE." + bName, // taking over node-b's name
	} {
		if err := nca.Publish(subj, []byte(`{}`)); err != nil {
			t.Fatal(err)
		}
		va.Wait(t, subj)
	}
	if after := count(); after != before {
		t.Fatalf("consumers of the stream went from %d to %d", before, after)
	}
	if _, err := st.Consumer(ctx, bName); err != nil {
		t.Fatalf("node-b's consumer: %v", err)
	}
	// node-b's view still follows the log; a third node still starts its view.
	rev, err := s.log.Create(ctx, "pods/default/p1", []byte(`{}`), nil)
	if err != nil {
		t.Fatal(err)
	}
	wctx, wcancel := context.WithTimeout(ctx, 10*time.Second)
	defer wcancel()
	if err := bView.WaitForRev(wctx, rev); err != nil {
		t.Fatalf("node-b's view after node-a's attempts: %v", err)
	}
	c := identity.NodeID("node-c")
	cView, err := openView(ctx, connectCreds(t, s, c, &identitytest.Violations{}), c)
	if err != nil {
		t.Fatalf("node-c opens its view: %v", err)
	}
	defer cView.Close()
	if _, err := cView.Get(ctx, "pods/default/p1", statelog.ReadOptions{}); err != nil {
		t.Fatal(err)
	}
	t.Logf("%d consumers on the stream: node-a's %d, node-b's, node-c's and the apiserver's", count(), identity.ConsumerBudget)
}

// Each connection of a node may hold at most identity.MaxSubscriptions subscriptions.
func TestNodeSubscriptionLimit(t *testing.T) {
	s := startSecured(t, t.TempDir())
	id := identity.NodeID("node-a")
	limited := make(chan error, 1)
	creds, err := identity.Creds(s.auth, id, identity.Names{})
	if err != nil {
		t.Fatal(err)
	}
	nc, err := nats.Connect(s.srv.ClientURL(), append(id.ClientOptions(), nats.UserCredentials(identitytest.WriteCreds(t, creds)),
		nats.ErrorHandler(func(_ *nats.Conn, _ *nats.Subscription, err error) {
			select {
			case limited <- err:
			default:
			}
		}))...)
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	for i := range identity.MaxSubscriptions + 1 {
		if _, err := nc.SubscribeSync(fmt.Sprintf("%s.s%d", id.InboxPrefix(), i)); err != nil {
			t.Fatal(err)
		}
	}
	select {
	case err := <-limited:
		t.Logf("subscription %d: %v", identity.MaxSubscriptions+1, err)
	case <-time.After(5 * time.Second):
		t.Fatalf("%d subscriptions on one node connection and no error", identity.MaxSubscriptions+1)
	}
}

package apiserver_test

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/trace"

	"github.com/skiff-sh/skiff/actors/actorkit"
	"github.com/skiff-sh/skiff/actors/apiclient"
	"github.com/skiff-sh/skiff/actors/apiserver"
	"github.com/skiff-sh/skiff/bus/natsserver/natsservertest"
	"github.com/skiff-sh/skiff/bus/rpc"
	"github.com/skiff-sh/skiff/bus/statelog"
	"github.com/skiff-sh/skiff/internal/tracing/tracingtest"
	"github.com/skiff-sh/skiff/schemas"
	"github.com/skiff-sh/skiff/testkit/testutil"
)

// localAPI is an apiserver actor on an embedded NATS server, reached both ways.
type localAPI struct {
	api    *apiserver.Server
	nc     *nats.Conn
	sys    *actorkit.System
	pid    *actorkit.PID
	direct *apiclient.Client
	nats   *apiclient.Client
}

// newLocalAPI builds the apiserver, with admit as its validating admission; start runs its
// actor.
func newLocalAPI(t *testing.T, admit apiserver.AdmissionFunc) *localAPI {
	t.Helper()
	_, nc := natsservertest.Start(t)
	l, err := statelog.Open(context.Background(), nc, statelog.Config{Memory: true})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { l.Close() })
	opts := apiserver.Options{Log: l}
	if admit != nil {
		opts.Validating = []apiserver.AdmissionFunc{admit}
	}
	api, err := apiserver.New(opts)
	if err != nil {
		t.Fatal(err)
	}
	a := &localAPI{api: api, nc: nc, sys: actorkit.NewSystem(),
		direct: &apiclient.Client{T: apiclient.Direct{Server: api}}, nats: &apiclient.Client{T: apiclient.NATS{Conn: nc}}}
	t.Cleanup(a.sys.Shutdown)
	return a
}

func (a *localAPI) start(t *testing.T) *localAPI {
	t.Helper()
	var err error
	if a.pid, err = a.sys.Spawn("apiserver", apiserver.NewActor(apiserver.ActorConfig{Server: a.api, NATS: a.nc})); err != nil {
		t.Fatal(err)
	}
	a.waitServing(t)
	return a
}

// waitServing waits until both ways answer.
func (a *localAPI) waitServing(t *testing.T) {
	t.Helper()
	testutil.Eventually(t, 10*time.Second, 10*time.Millisecond, func() error {
		for _, c := range a.both() {
			if _, err := c.Raw(context.Background(), http.MethodGet, "/api/v1/namespaces", "", nil); err != nil {
				return err
			}
		}
		return nil
	})
}

func (a *localAPI) both() map[string]*apiclient.Client {
	return map[string]*apiclient.Client{"direct": a.direct, "nats": a.nats}
}

func createNamespace(ctx context.Context, c *apiclient.Client, name string) error {
	_, err := c.Raw(ctx, http.MethodPost, "/api/v1/namespaces", "application/json", namespaceJSON(name))
	return err
}

// While the actor does not serve (before it starts, after it stops), a Direct request fails
// as a NATS request finds no responder; a restarted actor serves again.
func TestDirectRefusedWhileActorDoesNotServe(t *testing.T) {
	a := newLocalAPI(t, nil)
	refused := func(when string) {
		t.Helper()
		for way, c := range a.both() {
			if err := createNamespace(context.Background(), c, "refused"); !errors.Is(err, rpc.ErrNoResponders) {
				t.Errorf("%s, %s: %v, want rpc.ErrNoResponders", when, way, err)
			}
		}
	}
	refused("before the actor starts")

	a.start(t)
	a.sys.Send(a.pid, &actorkit.Crash{})
	testutil.Eventually(t, 10*time.Second, 10*time.Millisecond, func() error {
		if a.api.Starts() < 2 {
			return errors.New("apiserver actor not restarted yet")
		}
		return nil
	})
	a.waitServing(t)

	a.sys.Stop(a.pid)
	testutil.Eventually(t, 10*time.Second, 10*time.Millisecond, func() error {
		if err := createNamespace(context.Background(), a.direct, "after-stop"); !errors.Is(err, rpc.ErrNoResponders) {
			return fmt.Errorf("direct after stop: %v", err)
		}
		return nil
	})
	refused("after the actor stopped")
}

// The server's span of a Direct request is the child of the caller's, as over NATS.
func TestDirectContinuesTheCallersTrace(t *testing.T) {
	exp, tp := tracingtest.InMemory(t)
	prev := otel.GetTextMapPropagator()
	otel.SetTextMapPropagator(propagation.TraceContext{})
	t.Cleanup(func() { otel.SetTextMapPropagator(prev) })
	a := newLocalAPI(t, nil).start(t)
	for way, c := range a.both() {
		ctx, span := tp.Tracer("test").Start(context.Background(), "caller "+way)
		err := createNamespace(ctx, c, "traced-"+way)
		span.End()
		if err != nil {
			t.Fatalf("%s: %v", way, err)
		}
		var server []trace.SpanContext
		for _, s := range exp.GetSpans() {
			if s.Name == "create namespaces" && s.Parent.SpanID() == span.SpanContext().SpanID() {
				server = append(server, s.SpanContext)
			}
		}
		if len(server) != 1 || server[0].TraceID() != span.SpanContext().TraceID() {
			t.Errorf("%s: server spans under the caller's: %v", way, server)
		}
	}
}

type callerKey struct{}

// seenContext is what admission saw of a request's context, by object name.
type seenContext struct {
	mu       sync.Mutex
	deadline map[string]time.Time
	value    map[string]any
}

func (s *seenContext) admit(ctx context.Context, a *apiserver.Attributes) error {
	if a.Name == "boom" {
		panic("admission exploded")
	}
	dl, _ := ctx.Deadline()
	s.mu.Lock()
	defer s.mu.Unlock()
	s.deadline[a.Name], s.value[a.Name] = dl, ctx.Value(callerKey{})
	return nil
}

// A Direct request's server context is a NATS request's: the caller's deadline (30 s when it
// has none), none of the caller's values; a panic in the handler is an Internal error for
// the caller, not its crash.
func TestDirectServesAsNATSDoes(t *testing.T) {
	seen := &seenContext{deadline: map[string]time.Time{}, value: map[string]any{}}
	a := newLocalAPI(t, seen.admit).start(t)
	for way, c := range a.both() {
		ctx := context.WithValue(context.Background(), callerKey{}, "caller's")
		sent := time.Now()
		if err := createNamespace(ctx, c, "nodeadline-"+way); err != nil {
			t.Fatalf("%s: %v", way, err)
		}
		seen.mu.Lock()
		dl, v := seen.deadline["nodeadline-"+way], seen.value["nodeadline-"+way]
		seen.mu.Unlock()
		if d := dl.Sub(sent); d <= 29*time.Second || d > 31*time.Second {
			t.Errorf("%s: server deadline %v after the call, want the default 30s", way, d)
		}
		if v != nil {
			t.Errorf("%s: the server saw the caller's context value %v", way, v)
		}
		var re *rpc.Error
		if err := createNamespace(ctx, c, "boom"); !errors.As(err, &re) || re.Code != "Internal" {
			t.Errorf("%s: a panicking request: %v, want an Internal rpc.Error", way, err)
		}
	}
}

// A caller that gives up on a long poll is answered with its context's error at once, over
// NATS by not waiting, in process by ending the request.
func TestDirectEndsWithTheCaller(t *testing.T) {
	a := newLocalAPI(t, nil).start(t)
	if err := createNamespace(context.Background(), a.direct, "watched"); err != nil {
		t.Fatal(err)
	}
	k, _ := schemas.ByResource("", "v1", "configmaps")
	_, rv, err := a.direct.List(context.Background(), k, "watched", nil)
	if err != nil {
		t.Fatal(err)
	}
	for way, c := range a.both() {
		ctx, cancel := context.WithCancel(context.Background())
		time.AfterFunc(200*time.Millisecond, cancel)
		start := time.Now()
		_, err := c.WatchPoll(ctx, k, "watched", url.Values{"resourceVersion": {rv}, "timeoutSeconds": {"20"}})
		if !errors.Is(err, context.Canceled) {
			t.Errorf("%s: %v, want context.Canceled", way, err)
		}
		if d := time.Since(start); d > 10*time.Second {
			t.Errorf("%s: the poll returned %v after its caller gave up", way, d)
		}
	}
}

// With a fallback, what the local apiserver refuses while it does not serve goes to another
// replica, as a NATS request of a shared queue group would; once it serves, it answers.
func TestDirectFallsBackWhileActorDoesNotServe(t *testing.T) {
	local, other := newLocalAPI(t, nil), newLocalAPI(t, nil).start(t)
	c := &apiclient.Client{T: apiclient.Direct{Server: local.api, Fallback: other.nats.T}}
	exists := func(a *localAPI, name string) bool {
		_, err := a.direct.Raw(context.Background(), http.MethodGet, "/api/v1/namespaces/"+name, "", nil)
		return err == nil
	}
	if err := createNamespace(context.Background(), c, "while-down"); err != nil {
		t.Fatal(err)
	}
	if !exists(other, "while-down") {
		t.Fatal("the request refused locally did not reach the other replica")
	}
	local.start(t)
	if err := createNamespace(context.Background(), c, "while-up"); err != nil {
		t.Fatal(err)
	}
	if !exists(local, "while-up") || exists(other, "while-up") {
		t.Fatal("a request went to the other replica while the local apiserver served")
	}
}

package apiserver_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"sync"
	"testing"
	"time"

	"github.com/skiff-sh/skiff/actors/actorkit"
	"github.com/skiff-sh/skiff/actors/apiclient"
	"github.com/skiff-sh/skiff/actors/apiserver"
	"github.com/skiff-sh/skiff/actors/apiserver/authn"
	"github.com/skiff-sh/skiff/actors/apiserver/authz"
	"github.com/skiff-sh/skiff/actors/apiwire"
	"github.com/skiff-sh/skiff/bus/identity"
	"github.com/skiff-sh/skiff/bus/identity/identitytest"
	"github.com/skiff-sh/skiff/bus/natsserver"
	"github.com/skiff-sh/skiff/bus/rpc"
	"github.com/skiff-sh/skiff/bus/statelog"
	"github.com/skiff-sh/skiff/testkit/testutil"
)

// seenUsers records who each admitted write came from, by object name.
type seenUsers struct {
	mu    sync.Mutex
	users map[string]authn.User
}

func (s *seenUsers) admit(ctx context.Context, a *apiserver.Attributes) error {
	u, _ := authn.UserFrom(ctx)
	s.mu.Lock()
	defer s.mu.Unlock()
	s.users[a.Name] = u
	return nil
}

func (s *seenUsers) get(name string) (authn.User, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	u, ok := s.users[name]
	return u, ok
}

// startSecuredAPI runs the apiserver actor on a secured embedded NATS server.
func startSecuredAPI(t *testing.T, seen *seenUsers) (*natsserver.Server, *natsserver.Auth, *apiserver.Server) {
	t.Helper()
	srv, auth, nc := identitytest.StartServer(t, natsserver.Config{})
	l, err := statelog.Open(context.Background(), nc, statelog.Config{Memory: true})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { l.Close() })
	api, err := apiserver.New(apiserver.Options{Log: l, Validating: []apiserver.AdmissionFunc{seen.admit}})
	if err != nil {
		t.Fatal(err)
	}
	sys := actorkit.NewSystem()
	t.Cleanup(sys.Shutdown)
	if _, err := sys.Spawn("apiserver", apiserver.NewActor(apiserver.ActorConfig{Server: api, NATS: nc})); err != nil {
		t.Fatal(err)
	}
	admin := &apiclient.Client{T: apiclient.Direct{Server: api}}
	testutil.Eventually(t, 10*time.Second, 10*time.Millisecond, func() error {
		_, err := admin.Raw(context.Background(), http.MethodGet, "/api/v1/namespaces", "", nil)
		return err
	})
	return srv, auth, api
}

func namespaceJSON(name string) []byte {
	return []byte(`{"apiVersion":"v1","kind":"Namespace","metadata":{"name":"` + name + `"}}`)
}

// The subject names the caller, over NATS and in process (apiclient.Direct) alike.
func TestNATSSubjectNamesTheCaller(t *testing.T) {
	for _, way := range []string{"nats", "direct"} {
		t.Run(way, func(t *testing.T) { testSubjectNamesTheCaller(t, way) })
	}
}

func testSubjectNamesTheCaller(t *testing.T, way string) {
	seen := &seenUsers{users: map[string]authn.User{}}
	srv, auth, api := startSecuredAPI(t, seen)
	cases := []struct {
		id     identity.ID
		user   string
		groups []string
	}{
		{identity.NodeID("node-a"), "system:node:node-a", []string{authn.GroupNodes, authn.GroupAuthenticated}},
		{identity.NodeID("n1.example.com"), "system:node:n1.example.com", []string{authn.GroupNodes, authn.GroupAuthenticated}},
		{identity.ID{Role: identity.Scheduler}, authz.SchedulerUser, []string{authn.GroupAuthenticated}},
		{identity.ID{Role: identity.ControllerManager}, authz.ControllerManagerUser, []string{authn.GroupAuthenticated}},
		{identity.ID{Role: identity.Admin}, apiserver.AdminUser, []string{authn.GroupMasters, authn.GroupAuthenticated}},
	}
	for i, c := range cases {
		client := &apiclient.Client{T: apiclient.Direct{Server: api, Subject: c.id.APISubject()}}
		if way == "nats" {
			nc, err := identity.Connect(srv, auth, c.id, identity.Names{})
			if err != nil {
				t.Fatal(err)
			}
			defer nc.Close()
			client = &apiclient.Client{T: apiclient.NATS{Conn: nc, Subject: c.id.APISubject()}}
		}
		// A node may only write itself (NodeRestriction): each caller creates what it may.
		name, path, body := fmt.Sprintf("ns-%d", i), "/api/v1/namespaces", namespaceJSON(fmt.Sprintf("ns-%d", i))
		if c.id.Role == identity.Node {
			name, path = c.id.Node, "/api/v1/nodes"
			body = []byte(`{"apiVersion":"v1","kind":"Node","metadata":{"name":"` + name + `"}}`)
		}
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		_, err := client.Raw(ctx, http.MethodPost, path, "application/json", body)
		cancel()
		if err != nil {
			t.Fatalf("%s: create: %v", c.id, err)
		}
		u, ok := seen.get(name)
		if !ok || u.Name != c.user || fmt.Sprint(u.Groups) != fmt.Sprint(c.groups) {
			t.Errorf("%s: apiserver saw %+v (found %v), want %s %v", c.id, u, ok, c.user, c.groups)
		}
		if c.id.Role == identity.Node && u.NodeName() != c.id.Node {
			t.Errorf("%s: NodeName() = %q", c.id, u.NodeName())
		}
	}
}

func TestNodeCannotCallAsAnotherIdentity(t *testing.T) {
	seen := &seenUsers{users: map[string]authn.User{}}
	srv, auth, _ := startSecuredAPI(t, seen)
	v := &identitytest.Violations{}
	nc, err := identity.Connect(srv, auth, identity.NodeID("node-a"), identity.Names{}, v.Option())
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	for _, subj := range []string{identity.NodeID("node-b").APISubject(), "skiff.api.admin", apiwire.Subject} {
		client := &apiclient.Client{T: apiclient.NATS{Conn: nc, Subject: subj}}
		ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
		_, err := client.Raw(ctx, http.MethodPost, "/api/v1/namespaces", "application/json", namespaceJSON("stolen"))
		cancel()
		if err == nil {
			t.Fatalf("node-a called the API on %s", subj)
		}
	}
	for _, subj := range []string{identity.NodeID("node-b").APISubject(), "skiff.api.admin", apiwire.Subject} {
		v.Wait(t, subj)
	}
	if u, ok := seen.get("stolen"); ok {
		t.Fatalf("the apiserver admitted a write from %+v", u)
	}
}

// An agent of an earlier release sends the JSON envelope: it is still served, as that
// caller, and answered in the envelope.
func TestTheJSONEnvelopeIsStillAnswered(t *testing.T) {
	seen := &seenUsers{users: map[string]authn.User{}}
	srv, auth, _ := startSecuredAPI(t, seen)
	id := identity.ID{Role: identity.Admin}
	nc, err := identity.Connect(srv, auth, id, identity.Names{})
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	data, err := json.Marshal(apiwire.Request{Method: http.MethodPost, Path: "/api/v1/namespaces", ContentType: "application/json", Body: namespaceJSON("old-agent")})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	out, h, err := rpc.Call(ctx, nc, id.APISubject(), data, nil)
	if err != nil {
		t.Fatal(err)
	}
	var resp apiwire.Response
	if err := json.Unmarshal(out, &resp); err != nil || h.Get(apiwire.HdrCode) != "" {
		t.Fatalf("answer %q (code header %q) is not the JSON envelope: %v", out, h.Get(apiwire.HdrCode), err)
	}
	if u, ok := seen.get("old-agent"); resp.Code != http.StatusCreated || !ok || u.Name != apiserver.AdminUser {
		t.Fatalf("answer %d %s, admission saw %+v", resp.Code, resp.Body, u)
	}
}

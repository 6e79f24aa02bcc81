package apiserver

import (
	"math"
	"net/http"
	"strconv"
	"sync"

	"golang.org/x/time/rate"
	apierrors "k8s.io/apimachinery/pkg/api/errors"

	"github.com/skiff-sh/skiff/actors/apiserver/authn"
	"github.com/skiff-sh/skiff/actors/apiserver/authz"
)

// Per-user budgets, a simplified API Priority and Fairness: every user has a token bucket of
// requests and a number of seats for requests in flight (long-running requests take a token
// but no seat), so one user flooding or holding slow requests spends only its own budget.
// Exempt, as APF's exempt and system priority levels: system:masters, the scheduler and the
// controller-manager, and node heartbeats (a node's Lease in kube-node-lease and its Node
// object and status). A node's other requests have the node's own budget.
const (
	DefaultClientQPS      = 50  // kubelet's default --kube-api-qps
	DefaultClientBurst    = 100 // kubelet's default --kube-api-burst
	DefaultClientInflight = 32
)

// tooManyRequests is kube-apiserver's wording of a 429.
const tooManyRequests = "Too many requests, please try again later."

// exemptUsers are the control-plane components: they act for every user at once.
var exemptUsers = map[string]bool{authz.SchedulerUser: true, authz.ControllerManagerUser: true}

// longRunning requests hold no seat: they last as long as their client wants.
var longRunningSubresources = map[string]bool{"log": true, "exec": true, "attach": true, "portforward": true, "proxy": true}

// clientBudgets are the per-user buckets and seats.
type clientBudgets struct {
	limit    rate.Limit // < 0: no bucket
	burst    int
	inflight int // < 0: no seat limit
	mu       sync.Mutex
	users    map[string]*clientBudget
}

type clientBudget struct {
	bucket *rate.Limiter
	seats  int // in flight now; under clientBudgets.mu
}

// newClientBudgets applies the defaults: 0 = the default, negative = no limit.
func newClientBudgets(qps float64, burst, inflight int) *clientBudgets {
	if qps == 0 {
		qps = DefaultClientQPS
	}
	if burst <= 0 {
		burst = max(int(math.Ceil(2*qps)), 1) // DefaultClientBurst for DefaultClientQPS
	}
	if inflight == 0 {
		inflight = DefaultClientInflight
	}
	c := &clientBudgets{limit: rate.Limit(qps), burst: burst, inflight: inflight, users: map[string]*clientBudget{}}
	if qps < 0 {
		c.limit = -1
	}
	return c
}

func (c *clientBudgets) off() bool { return c.limit < 0 && c.inflight < 0 }

func (c *clientBudgets) budget(user string) *clientBudget {
	b, ok := c.users[user]
	if !ok {
		b = &clientBudget{}
		if c.limit >= 0 {
			b.bucket = rate.NewLimiter(c.limit, c.burst)
		}
		c.users[user] = b
	}
	return b
}

// admit takes a token and, unless long-running, a seat; release gives the seat back. A refusal
// says how many seconds to wait.
func (c *clientBudgets) admit(user string, seat bool) (release func(), retryAfter int, ok bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	b := c.budget(user)
	if seat && c.inflight >= 0 && b.seats >= c.inflight {
		return nil, 1, false
	}
	if b.bucket != nil && !b.bucket.Allow() {
		res := b.bucket.Reserve()
		wait := int(math.Ceil(res.Delay().Seconds()))
		res.Cancel()
		return nil, max(wait, 1), false
	}
	if !seat {
		return func() {}, 0, true
	}
	b.seats++
	return func() {
		c.mu.Lock()
		b.seats--
		c.mu.Unlock()
	}, 0, true
}

// exemptFromBudget reports whether r is spent from no user's budget.
func exemptFromBudget(u authn.User, r *http.Request) bool {
	if u.InGroup(authn.GroupMasters) || exemptUsers[u.Name] || isOpen(r) {
		return true
	}
	if u.NodeName() == "" {
		return false
	}
	info, ok := parseRequest(r)
	if !ok {
		return false
	}
	switch {
	case info.gv.Group == "" && info.resource == "nodes":
		return true // NodeRestriction keeps it to the node's own Node
	case info.gv.Group == "coordination.k8s.io" && info.resource == "leases" && info.namespace == "kube-node-lease":
		return true // and to its own Lease
	}
	return false
}

func isLongRunning(r *http.Request) bool {
	info, ok := parseRequest(r)
	return ok && (info.verb == "watch" || longRunningSubresources[info.subresource])
}

func (s *Server) rateLimited(next http.Handler) http.Handler {
	c := newClientBudgets(s.opts.ClientQPS, s.opts.ClientBurst, s.opts.ClientInflight)
	if s.opts.Auth == nil || c.off() { // without authentication every caller is trusted
		return next
	}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		u, _ := authn.UserFrom(r.Context())
		if exemptFromBudget(u, r) {
			next.ServeHTTP(w, r)
			return
		}
		release, wait, ok := c.admit(u.Name, !isLongRunning(r))
		if !ok {
			w.Header().Set("Retry-After", strconv.Itoa(wait))
			writeError(w, apierrors.NewTooManyRequests(tooManyRequests, wait))
			return
		}
		defer release()
		next.ServeHTTP(w, r)
	})
}

// Package clusterdns is the node's cluster DNS server: an actor that answers the Kubernetes DNS
// names of Services and their endpoints from the process's shared Service and EndpointSlice
// informers, and forwards every other name to the node's upstream resolvers. Informer events
// arrive in its mailbox and replace one Service's records in an in-memory zone, so an answer
// follows an EndpointSlice change as soon as the informer delivers it; a query never reads
// the API or walks a cache.
package clusterdns

import (
	"context"
	"log/slog"
	"strings"
	"sync"

	"github.com/miekg/dns"
	discoveryv1 "k8s.io/api/discovery/v1"
	"k8s.io/apimachinery/pkg/runtime"

	"github.com/skiff-sh/skiff/actors/informer"
	"github.com/skiff-sh/skiff/schemas"
)

// DefaultDomain is the cluster domain when Config.Domain is empty.
const DefaultDomain = "cluster.local"

// Config configures one node's DNS server.
type Config struct {
	Informers *informer.Factory // the process's shared informers
	// OwnInformers: no other reader shares the Service and EndpointSlice informers (skiff dns,
	// not a node agent, whose proxy reads them), so they cache only the fields the server
	// reads. New panics if the factory already made them.
	OwnInformers bool
	NodeName     string
	Domain       string // the cluster domain; DefaultDomain if empty
	// Listen is the ip:port served over UDP and TCP; port 0 picks one (the same for both).
	// The address need not exist yet (the node bridge gets it with the first pod): the
	// sockets are bound with IP_FREEBIND.
	Listen string
	// Upstreams are the resolvers for names outside the cluster (ip, or ip:port); nil = the
	// nameservers of ResolvConf that are not loopback.
	Upstreams  []string
	ResolvConf string // default /etc/resolv.conf
	Logger     *slog.Logger
}

// Server holds what outlives the actor's restarts: configuration and informers. Each
// incarnation builds its zone from the informers' replay and listens once they have synced.
type Server struct {
	cfg Config
	// Their objects are API ones, or the server's own with OwnInformers (asService, asSlice).
	svcs, slices *informer.Informer
	handlers     map[*informer.Informer]func(z *zone) informer.Handler

	mu   sync.Mutex
	addr string // where the current incarnation serves; "" while it does not
}

// IndexService files EndpointSlices under the namespace/name of their Service. The proxy files
// the same index under the same name (an informer keeps the first), so a node holds one.
const IndexService = "endpointslice-service"

// Kinds are the kinds of the state log the server reads: a process that runs it alone
// keeps no others (controlplane.Reads).
func Kinds() []*schemas.Kind {
	return []*schemas.Kind{informer.MustKind("", "services"), informer.MustKind("discovery.k8s.io", "endpointslices")}
}

// New prepares a server; spawn Producer() on an actorkit.System to run it.
func New(cfg Config) *Server {
	if cfg.Domain == "" {
		cfg.Domain = DefaultDomain
	}
	if cfg.ResolvConf == "" {
		cfg.ResolvConf = "/etc/resolv.conf"
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	if cfg.OwnInformers {
		keepOwnFields(cfg.Informers)
	}
	s := &Server{
		cfg:    cfg,
		svcs:   cfg.Informers.For("", "services"),
		slices: cfg.Informers.For("discovery.k8s.io", "endpointslices"),
	}
	s.slices.AddIndexer(IndexService, func(o runtime.Object) []string {
		if k := serviceOf(o); k != "" {
			return []string{k}
		}
		return nil
	})
	s.handlers = map[*informer.Informer]func(z *zone) informer.Handler{
		s.svcs: func(z *zone) informer.Handler {
			changed := func(o runtime.Object) {
				m := o.(interface {
					GetNamespace() string
					GetName() string
				})
				s.refresh(z, key(m.GetNamespace(), m.GetName()))
			}
			return informer.Funcs{Add: changed, Update: func(_, o runtime.Object) { changed(o) }, Delete: changed}
		},
		s.slices: func(z *zone) informer.Handler {
			changed := func(objs ...runtime.Object) {
				for _, o := range objs {
					if k := serviceOf(o); k != "" {
						s.refresh(z, k)
					}
				}
			}
			return informer.Funcs{Add: func(o runtime.Object) { changed(o) }, Update: func(old, o runtime.Object) { changed(old, o) },
				Delete: func(o runtime.Object) { changed(o) }}
		},
	}
	return s
}

// WaitForSync blocks until the Service and EndpointSlice informers have their first
// snapshots, or ctx ends.
func (s *Server) WaitForSync(ctx context.Context) bool {
	return s.svcs.WaitForSync(ctx) && s.slices.WaitForSync(ctx)
}

// Zone is the cluster zone's name, fully qualified ("cluster.local.").
func (s *Server) Zone() string { return dns.Fqdn(strings.ToLower(s.cfg.Domain)) }

// Addr is the ip:port the server answers on, "" until it has synced and listens.
func (s *Server) Addr() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.addr
}

func (s *Server) setAddr(addr string) {
	s.mu.Lock()
	s.addr = addr
	s.mu.Unlock()
}

// refresh recomputes one Service's records from the caches. The caches may be ahead of the
// event being handled; the records are then already those of a later event, which changes
// nothing when it arrives.
func (s *Server) refresh(z *zone, k string) {
	ns, name, _ := strings.Cut(k, "/")
	svc, ok := s.svcs.Get(ns, name)
	if !ok {
		z.idx.set(k, nil)
		return
	}
	objs := s.slices.ByIndex(IndexService, k)
	slices := make([]*dnsSlice, len(objs))
	for n, o := range objs {
		slices[n] = asSlice(o)
	}
	z.idx.set(k, serviceRecords(asService(svc), slices, z.idx.zone))
}

func key(namespace, name string) string { return namespace + "/" + name }

// serviceOf is the key of the Service a slice (of either form) belongs to ("" if unlabelled).
func serviceOf(o runtime.Object) string {
	if s, ok := o.(*dnsSlice); ok {
		return s.Service
	}
	es := o.(*discoveryv1.EndpointSlice)
	if name := es.Labels[discoveryv1.LabelServiceName]; name != "" {
		return key(es.Namespace, name)
	}
	return ""
}

// FaultEvent names the DNS actor's event-handler fault point (actorkit.InjectPanic).
func FaultEvent(node string) string { return "clusterdns " + node + " event" }

// FaultQuery names the fault point of a query's handling: a panic there fails the actor too.
func FaultQuery(node string) string { return "clusterdns " + node + " query" }

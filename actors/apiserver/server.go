// Package apiserver is the only writer of Skiff's state log. It serves the Kubernetes REST API
// (paths, JSON, metav1.Status errors, watch streams) over HTTP to people and kubectl, and over
// NATS request/reply to the other actors.
package apiserver

import (
	"context"
	"errors"
	"io"
	"net/http"
	"sync/atomic"
	"time"

	"github.com/nats-io/nats.go"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/skiff-sh/skiff/actors/apiserver/authn/serviceaccount"
	"github.com/skiff-sh/skiff/actors/apiserver/crd"
	"github.com/skiff-sh/skiff/actors/apiserver/openapi"
	"github.com/skiff-sh/skiff/bus/statelog"
	"github.com/skiff-sh/skiff/internal/metrics"
	"github.com/skiff-sh/skiff/schemas"
)

// DefaultMaxBodyBytes matches kube-apiserver's --max-request-body-bytes default.
const DefaultMaxBodyBytes = 3 << 20

// Attributes describe one write for admission plugins.
type Attributes struct {
	Verb        string // create, update, patch, delete
	Kind        *schemas.Kind
	Namespace   string
	Name        string
	Subresource string
	Object      runtime.Object // the object as it will be written (nil on delete)
	OldObject   runtime.Object // the stored object (nil on create)
}

// AdmissionFunc may change (mutating) or reject (validating) a write; an error rejects it and
// is returned to the client as is when it is an API status error.
type AdmissionFunc func(ctx context.Context, a *Attributes) error

// Options configure a Server.
type Options struct {
	Log          *statelog.Log
	MaxBodyBytes int64
	ServiceCIDR  string // ClusterIPs are allocated from here; default 10.96.0.0/16
	// NodePortRange ("LOW-HIGH") is where nodePorts and healthCheckNodePorts are allocated;
	// default DefaultNodePortRange.
	NodePortRange string
	// A status write's or binding's object shares all but its top level and status with the
	// stored object, which others read: mutating admission may set its fields and change its
	// status, and must replace, never change in place, the maps and slices below the rest.
	Mutating   []AdmissionFunc
	Validating []AdmissionFunc
	Now        func() time.Time
	NodeConn   *nats.Conn // reaches the node agents for pods/log and pods/exec; nil = not served
	// Auth turns on authentication and RBAC (security.go); nil = everyone is system:masters.
	Auth *Auth
	// ClientQPS, ClientBurst and ClientInflight are each user's budget (ratelimit.go):
	// requests per second, the burst above it, requests in flight. 0 = the default
	// (DefaultClientQPS, twice the QPS, DefaultClientInflight); negative = no limit.
	ClientQPS      float64
	ClientBurst    int
	ClientInflight int
	// Timeouts of the HTTP server (timeouts.go); zero fields take the defaults.
	Timeouts Timeouts
	// Health reports what keeps this process from doing its job (an actor stopped for good);
	// a non-nil error turns /livez and /readyz red. nil = always healthy.
	Health func() error
	// ServiceAccountIssuer signs TokenRequests (serviceaccounts/token) and serves OIDC
	// discovery; nil = neither is served.
	ServiceAccountIssuer *serviceaccount.Issuer
	// ServiceAccountAdmission turns on kube's ServiceAccount admission (saadmission.go);
	// nil = off: pods keep what they were sent with and need no account.
	ServiceAccountAdmission *ServiceAccountAdmission
	// Ready reports what keeps this server from accepting writes (the state log's disk full);
	// a non-nil error turns /readyz red, not /livez: a restart would not help. nil = ready.
	Ready func() error
	// CheckSharedMutations keeps a copy of every stored object's shared decode the server
	// reads, so SharedMutations can tell whether anything changed one. For tests: it holds
	// every such object for the server's life.
	CheckSharedMutations bool
}

// Server is the API server's request handling; the actor in actor.go owns its lifecycle.
type Server struct {
	log       *statelog.Log
	opts      Options
	now       func() time.Time
	ips       *ipAllocator
	nodePorts *portAllocator
	mux       *http.ServeMux
	handler   http.Handler
	started   time.Time
	starts    atomic.Int64
	serving   atomic.Bool   // the apiserver actor is up: in-process requests are served (local.go)
	events    *sharedEvents // watched objects decoded and encoded once for every watcher
	shared    *sharedCheck  // nil unless Options.CheckSharedMutations
	pods      *podIndex     // pods by spec.nodeName, followed while the apiserver actor runs
	openapi   *openapi.Registry
	crds      *crd.Registry                // the CustomResourceDefinitions served, followed likewise
	crdGVs    map[schema.GroupVersion]bool // group versions whose OpenAPI documents CRDs give
}

// New builds a Server over an open state log.
func New(o Options) (*Server, error) {
	if o.Log == nil {
		return nil, errors.New("apiserver: Options.Log is required")
	}
	if o.MaxBodyBytes == 0 {
		o.MaxBodyBytes = DefaultMaxBodyBytes
	}
	limitJSONPatchCopies(o.MaxBodyBytes)
	o.Timeouts = o.Timeouts.withDefaults()
	if o.ServiceCIDR == "" {
		o.ServiceCIDR = "10.96.0.0/16"
	}
	if o.Now == nil {
		o.Now = time.Now
	}
	ips, err := newIPAllocator(o.Log, o.ServiceCIDR)
	if err != nil {
		return nil, err
	}
	if o.NodePortRange == "" {
		o.NodePortRange = DefaultNodePortRange
	}
	nodePorts, err := newPortAllocator(o.Log, o.NodePortRange)
	if err != nil {
		return nil, err
	}
	s := &Server{log: o.Log, opts: o, now: o.Now, ips: ips, nodePorts: nodePorts, started: o.Now(), events: newSharedEvents(defaultSharedEventBytes), pods: newPodIndex()}
	if o.CheckSharedMutations {
		s.shared = newSharedCheck()
	}
	if o.ServiceAccountAdmission != nil { // first of the plugins, as kube orders them
		s.opts.Mutating = append([]AdmissionFunc{s.admitServiceAccount}, o.Mutating...)
	}
	s.crds = crd.NewRegistry(s.cleanupCRD, nil)
	s.mux = http.NewServeMux()
	s.mux.HandleFunc("/api", s.serveCoreVersions)
	s.mux.HandleFunc("/apis", s.serveGroups)
	s.mux.HandleFunc("/version", s.serveVersion)
	s.mux.HandleFunc("/healthz", serveOK)
	s.mux.HandleFunc("/livez", s.serveHealth)
	s.mux.HandleFunc("/readyz", s.serveReady)
	s.installOpenAPI()
	s.crds.OnServed(s.publishCRDOpenAPI)
	s.mux.HandleFunc("/api/", s.serveResource)
	s.mux.HandleFunc("/apis/", s.serveResource)
	s.mux.Handle("/metrics", metrics.Handler())
	if iss := o.ServiceAccountIssuer; iss != nil {
		s.mux.HandleFunc(serviceaccount.DiscoveryPath, serveDocument(iss.Discovery(), "application/json"))
		s.mux.HandleFunc(serviceaccount.JWKSPath, serveDocument(iss.JWKS(), "application/jwk-set+json"))
	}
	if o.Auth != nil && o.Auth.Authenticator == nil {
		return nil, errors.New("apiserver: Options.Auth.Authenticator is required")
	}
	// The chain's order and why: see security.go.
	s.handler = s.bodyDeadline(s.authenticate(s.impersonated(instrumented(traced(s.rateLimited(s.authorized(s.mux)))))))
	return s, nil
}

// Handler returns the HTTP handler of the Kubernetes API.
func (s *Server) Handler() http.Handler { return s.handler }

func serveOK(w http.ResponseWriter, _ *http.Request) { _, _ = io.WriteString(w, "ok") }

// serveHealth answers /livez and /readyz: 500 naming the cause while Options.Health fails.
func (s *Server) serveHealth(w http.ResponseWriter, r *http.Request) {
	if s.opts.Health != nil {
		if err := s.opts.Health(); err != nil {
			http.Error(w, "[-]actors failed: "+err.Error(), http.StatusInternalServerError)
			return
		}
	}
	serveOK(w, r)
}

// serveReady answers /readyz: /livez's checks, then whether the state log takes writes.
func (s *Server) serveReady(w http.ResponseWriter, r *http.Request) {
	if s.opts.Ready != nil {
		if err := s.opts.Ready(); err != nil {
			http.Error(w, "[-]statelog-writable failed: "+err.Error(), http.StatusInternalServerError)
			return
		}
	}
	s.serveHealth(w, r)
}

// EnsureDefaultNamespaces creates the namespaces every cluster starts with.
func (s *Server) EnsureDefaultNamespaces(ctx context.Context) error {
	k, _ := schemas.ByResource("", "v1", "namespaces")
	for _, name := range []string{"default", "kube-system", "kube-public", "kube-node-lease"} {
		body := []byte(`{"apiVersion":"v1","kind":"Namespace","metadata":{"name":"` + name + `"}}`)
		_, err := s.create(ctx, k, "", body, writeOptions{})
		if err != nil && !apierrors.IsAlreadyExists(err) {
			return err
		}
	}
	return nil
}

func (s *Server) serveResource(w http.ResponseWriter, r *http.Request) {
	info, ok := parseRequest(r)
	if !ok {
		if s.serveGroupVersion(w, r) {
			return
		}
		writeError(w, errNotServed)
		return
	}
	if s.serveReview(w, r, info) || s.serveResourceMetrics(w, r, info) {
		return
	}
	k, found := schemas.ByResource(info.gv.Group, info.gv.Version, info.resource)
	if !found || (info.namespace != "" && !k.Namespaced) || (info.subresource != "" && !hasSubresource(k, info.subresource)) {
		writeError(w, errNotServed)
		return
	}
	ans, err := answerFor(r, k, info)
	if err != nil {
		writeError(w, err)
		return
	}
	ctx := r.Context()
	body, native, err := s.writeBody(w, r, k, info)
	if err != nil {
		writeError(w, err)
		return
	}
	wo, err := writeOptionsFrom(info)
	if err != nil {
		writeError(w, err)
		return
	}
	wo.protobuf = native
	wo.userAgent = r.UserAgent()
	wo.warnings = newWarnings(w)
	if msg := deprecationWarning(k); msg != "" {
		wo.warnings.add(msg)
	}
	if (info.verb == "get" || info.verb == "create") && connectSubresources[info.subresource] {
		s.serveConnect(w, r, k, info, body)
		return
	}
	var obj runtime.Object
	code := http.StatusOK
	switch info.verb {
	case "get":
		if info.subresource == "log" {
			s.serveLog(w, r, k, info)
			return
		}
		if info.subresource == "scale" {
			obj, err = s.getScale(ctx, k, info.namespace, info.name)
			break
		}
		obj, err = s.getObject(ctx, k, info)
		if err == nil && ans.shape == shapeTable {
			obj = schemas.Table(k, []runtime.Object{obj}, s.now())
		}
	case "list":
		s.serveList(w, r, k, info, ans)
		return
	case "watch":
		if isWirePoll(ctx) {
			s.serveWatchPoll(w, r, k, info)
			return
		}
		s.serveWatch(w, r, k, info, ans)
		return
	case "create":
		switch info.subresource {
		case "binding":
			obj, err = s.bind(ctx, k, info.namespace, info.name, body, wo)
		case "eviction":
			obj, err = s.evict(ctx, k, info.namespace, info.name, body, wo)
		case "token":
			obj, err = s.createToken(ctx, k, info.namespace, info.name, body)
		case "":
			obj, err = s.create(ctx, k, info.namespace, body, wo)
		default:
			err = apierrors.NewMethodNotSupported(groupResource(k), "create "+info.subresource)
		}
		code = http.StatusCreated
	case "update":
		if info.subresource == "scale" {
			obj, err = s.updateScale(ctx, k, info.namespace, info.name, body, wo)
			break
		}
		obj, err = s.update(ctx, k, info.namespace, info.name, info.subresource, body, wo)
	case "patch":
		var created bool
		if obj, created, err = s.patch(ctx, k, info.namespace, info.name, info.subresource, r.Header.Get("Content-Type"), body, wo); created {
			code = http.StatusCreated // an apply that created the object
		}
	case "delete":
		obj, err = s.delete(ctx, k, info, body, wo)
	case "deletecollection":
		obj, err = s.deleteCollection(ctx, k, info, body, wo)
	default:
		err = apierrors.NewMethodNotSupported(groupResource(k), r.Method)
	}
	if err != nil {
		writeError(w, err)
		return
	}
	writeAnswer(w, ans, code, obj)
}

// writeBody reads the body of a method that carries one; native: see protobufBody.
func (s *Server) writeBody(w http.ResponseWriter, r *http.Request, k *schemas.Kind, info requestInfo) (body []byte, native bool, err error) {
	switch r.Method {
	case http.MethodPost, http.MethodPut, http.MethodPatch, http.MethodDelete:
	default:
		return nil, false, nil
	}
	if body, err = s.readBody(w, r); err != nil {
		return nil, false, err
	}
	return protobufBody(k, info, r.Header.Get("Content-Type"), body)
}

// errNotServed is kube-apiserver's answer for a path it serves nothing at (an unknown group,
// version, resource or subresource), the text kubectl recognises.
var errNotServed = &apierrors.StatusError{ErrStatus: metav1.Status{Status: metav1.StatusFailure, Code: http.StatusNotFound,
	Reason: metav1.StatusReasonNotFound, Message: "the server could not find the requested resource"}}

// writeOptions are the query parameters that shape a write.
type writeOptions struct {
	dryRun       bool
	strict       bool // fieldValidation=Strict: unknown fields are errors
	protobuf     bool // the body is a whole object in protobuf (which has no unknown fields)
	warn         bool // fieldValidation=Warn (the default): unknown fields are warnings
	fieldManager string
	warnings     *warnings // the response's Warning headers; nil = none sent (internal writes)
	userAgent    string    // names the manager when fieldManager is empty
	force        string    // apply's force parameter, as sent
	// applied marks a write whose managedFields the apply already computed; trackAs records
	// the write's changes as those of a subresource (scale) that has no field manager of its own.
	applied bool
	trackAs string
}

func writeOptionsFrom(info requestInfo) (writeOptions, error) {
	fv, err := fieldValidation(info.query.Get("fieldValidation"))
	return writeOptions{
		dryRun:       info.query.Get("dryRun") == "All",
		strict:       fv == "Strict",
		warn:         fv == "Warn",
		fieldManager: info.query.Get("fieldManager"),
		force:        info.query.Get("force"),
	}, err
}

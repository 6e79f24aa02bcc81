package proxy

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/http"
	"strconv"
	"sync"
	"sync/atomic"

	corev1 "k8s.io/api/core/v1"

	"github.com/skiff-sh/skiff/bpf/nodeport"
)

// healthChecks serves each LoadBalancer with externalTrafficPolicy Local on its
// healthCheckNodePort, as kube-proxy does: 200 while this node has endpoints of it, 503 without,
// so a load balancer in front sends traffic only to nodes that can take it. One incarnation's;
// its listeners close with it.
type healthChecks struct {
	goFn func(name string, fn func(ctx context.Context)) // a goroutine of the proxy actor

	mu    sync.Mutex
	bySvc map[string]*healthServer // service key -> its server
}

type healthServer struct {
	port  int32
	srv   *http.Server
	local atomic.Int64
}

// healthBody is kube-proxy's answer.
type healthBody struct {
	Service struct {
		Namespace string `json:"namespace"`
		Name      string `json:"name"`
	} `json:"service"`
	LocalEndpoints      int64 `json:"localEndpoints"`
	ServiceProxyHealthy bool  `json:"serviceProxyHealthy"`
}

// healthCheckOf is the port to serve for svc (0: none) and its local endpoints among tc's.
func healthCheckOf(svc *corev1.Service, tc map[nodeport.Key][]nodeport.Backend) (int32, int) {
	if svc == nil || svc.Spec.Type != corev1.ServiceTypeLoadBalancer || svc.Spec.ExternalTrafficPolicy != corev1.ServiceExternalTrafficPolicyLocal {
		return 0, 0
	}
	local := map[nodeport.Backend]bool{}
	for _, bs := range tc {
		for _, b := range bs {
			if b.Local {
				local[nodeport.Backend{Addr: b.Addr, Local: true}] = true
			}
		}
	}
	return svc.Spec.HealthCheckNodePort, len(local)
}

// set serves key's health check on port with local endpoints (port 0: stops serving it).
func (h *healthChecks) set(key string, port int32, local int) error {
	if h == nil {
		return nil
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	cur := h.bySvc[key]
	if cur != nil && cur.port == port {
		cur.local.Store(int64(local))
		return nil
	}
	if cur != nil {
		_ = cur.srv.Close()
		delete(h.bySvc, key)
	}
	if port == 0 {
		return nil
	}
	ln, err := net.Listen("tcp", ":"+strconv.Itoa(int(port)))
	if err != nil {
		return fmt.Errorf("health check of %s on port %d: %w", key, port, err)
	}
	hs := &healthServer{port: port}
	hs.local.Store(int64(local))
	ns, name := splitKey(key)
	hs.srv = &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		var b healthBody
		b.Service.Namespace, b.Service.Name = ns, name
		b.LocalEndpoints, b.ServiceProxyHealthy = hs.local.Load(), true
		w.Header().Set("Content-Type", "application/json")
		w.Header().Set("X-Content-Type-Options", "nosniff")
		if b.LocalEndpoints == 0 {
			w.WriteHeader(http.StatusServiceUnavailable)
		}
		_ = json.NewEncoder(w).Encode(b)
	})}
	h.bySvc[key] = hs
	h.goFn("proxy health check "+key, func(context.Context) {
		if err := hs.srv.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
			panic(fmt.Sprintf("proxy: health check of %s on port %d: %v", key, port, err))
		}
	})
	return nil
}

// closeAll stops every listener (the incarnation ends).
func (h *healthChecks) closeAll() {
	h.mu.Lock()
	defer h.mu.Unlock()
	for key, hs := range h.bySvc {
		_ = hs.srv.Close()
		delete(h.bySvc, key)
	}
}

// healthChecks is the current incarnation's (nil between incarnations).
func (p *Proxy) healthChecks() *healthChecks {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.hc
}

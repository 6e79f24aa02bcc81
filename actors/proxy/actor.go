package proxy

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"

	"golang.org/x/sys/unix"
	"k8s.io/client-go/util/workqueue"

	"github.com/skiff-sh/skiff/actors/actorkit"
	"github.com/skiff-sh/skiff/actors/informer"
	"github.com/skiff-sh/skiff/bpf/lb"
	"github.com/skiff-sh/skiff/bpf/nodeport"
)

// Producer returns the actor producer to give to actorkit.System.Spawn.
// Every incarnation loads the programs afresh and adopts the pinned maps
// and links, so a restart changes nothing a connect() can see.
func (p *Proxy) Producer() func() actorkit.Actor {
	return func() actorkit.Actor {
		a := &proxyActor{p: p}
		return &informer.WorkLoop{Name: "proxy sync", Fault: FaultEvent(p.cfg.NodeName), Handlers: p.handlers,
			Cleanup: p.cfg.Cleanup, Start: a.start, Run: a.run, Stop: a.stop}
	}
}

// proxyActor is what one incarnation of the proxy's work loop holds.
type proxyActor struct {
	p  *Proxy
	q  workqueue.TypedRateLimitingInterface[string]
	dp *lb.Dataplane       // set by run, read after it returned
	np *nodeport.Dataplane // likewise; nil when the node serves no node ports
	hc *healthChecks       // this incarnation's health check listeners
}

// FaultEvent names the proxy's event-handler fault point (actorkit.InjectPanic).
func FaultEvent(node string) string { return "proxy " + node + " event" }

// start publishes the incarnation's queue and health checks to the event handlers.
func (a *proxyActor) start(in *informer.Incarnation) {
	a.q = in.Queue
	a.hc = &healthChecks{bySvc: map[string]*healthServer{},
		goFn: func(name string, fn func(context.Context)) { in.Sys.GoFrom(in.Self, name, fn) }}
	a.p.mu.Lock()
	a.p.queue, a.p.hc = a.q, a.hc
	a.p.mu.Unlock()
}

func (a *proxyActor) run(ctx context.Context, _ *informer.Incarnation) {
	p := a.p
	dp, np := a.load(ctx)
	if dp == nil {
		return
	}
	if !p.svcs.WaitForSync(ctx) || !p.slices.WaitForSync(ctx) || (p.pods != nil && !p.pods.WaitForSync(ctx)) {
		return
	}
	resynced := actorkit.Retry(ctx, 10*time.Millisecond, 5*time.Second, func() error { return p.resync(dp, np) }, func(err error) {
		p.cfg.Logger.Warn("proxy resync failed; retrying", "node", p.cfg.NodeName, "err", err)
	})
	if !resynced {
		return
	}
	p.mu.Lock()
	p.synced = true
	p.mu.Unlock()
	actorkit.Drain(ctx, a.q, func(key string) error { return p.tracedSync(dp, np, key) }, func(key string, err error) {
		p.cfg.Logger.Warn("proxy sync failed; requeued", "service", key, "err", err)
	})
}

// load loads and attaches the dataplanes, retrying until they work or ctx ends.
func (a *proxyActor) load(ctx context.Context) (*lb.Dataplane, *nodeport.Dataplane) {
	p := a.p
	actorkit.Retry(ctx, 100*time.Millisecond, 10*time.Second, func() (err error) {
		a.dp, err = p.open()
		return err
	}, func(err error) { p.cfg.Logger.Error("proxy dataplane", "node", p.cfg.NodeName, "err", err) })
	if a.dp == nil {
		return nil, nil
	}
	// Without the tc programs Services still work for the node's own clients; a node
	// address on no interface (--node-ip behind NAT) must not take them down.
	np, err := p.openExternal()
	if err != nil {
		p.cfg.Logger.Error("proxy: traffic from outside to node ports, LoadBalancers and hostPorts is not served on this node", "node", p.cfg.NodeName, "err", err)
	} else if np != nil {
		p.cfg.Logger.Info("proxy: node port programs attach by "+string(np.Mode()), "node", p.cfg.NodeName)
	}
	a.np = np
	p.mu.Lock()
	p.dp, p.np = a.dp, np
	p.mu.Unlock()
	return a.dp, np
}

func (p *Proxy) open() (*lb.Dataplane, error) {
	if err := ensureBPFFS(p.cfg.PinDir); err != nil {
		return nil, err
	}
	opts := p.cfg.Maps
	opts.PinPath = p.cfg.PinDir
	dp, err := lb.Load(opts)
	if err != nil {
		return nil, err
	}
	for _, cg := range p.cfg.Cgroups {
		if err := dp.Attach(cg); err != nil {
			dp.Close() // pinned hooks attached so far keep working
			return nil, err
		}
	}
	return dp, nil
}

// ensureBPFFS mounts bpffs at BPFRoot when the pin directory is below it
// and nothing is mounted there yet, as a node's first proxy must.
func ensureBPFFS(pinDir string) error {
	if !strings.HasPrefix(filepath.Clean(pinDir), BPFRoot+"/") {
		return nil
	}
	var fs unix.Statfs_t
	if err := unix.Statfs(BPFRoot, &fs); err == nil && fs.Type == unix.BPF_FS_MAGIC {
		return nil
	}
	if err := os.MkdirAll(BPFRoot, 0o755); err != nil {
		return err
	}
	if err := unix.Mount("bpf", BPFRoot, "bpf", 0, ""); err != nil {
		return fmt.Errorf("mount bpffs at %s: %w", BPFRoot, err)
	}
	return nil
}

// stop ends the incarnation once run has returned. The dataplane is closed, which leaves the
// pinned hooks and maps serving, or removed when cleanup is asked for.
func (a *proxyActor) stop(cleanup bool) {
	p := a.p
	p.mu.Lock()
	if p.queue == a.q {
		p.queue = nil
	}
	p.dp, p.np = nil, nil
	if p.hc == a.hc {
		p.hc = nil
	}
	p.synced = false
	p.mu.Unlock()
	a.hc.closeAll()
	var err error
	if a.np != nil {
		if cleanup {
			err = a.np.Remove()
		} else {
			err = a.np.Close()
		}
		a.np = nil
	}
	switch {
	case cleanup && a.dp != nil:
		err = errors.Join(err, a.dp.Remove())
	case cleanup:
		err = errors.Join(err, removePinned(p.cfg.PinDir))
	case a.dp != nil:
		err = errors.Join(err, a.dp.Close())
	}
	if err != nil {
		p.cfg.Logger.Warn("proxy stop", "node", p.cfg.NodeName, "cleanup", cleanup, "err", err)
	}
	a.dp = nil
}

// removePinned cleans up pins this incarnation never managed to load:
// unlinking a pinned link detaches it, and unpinned maps are freed.
func removePinned(dir string) error { return os.RemoveAll(dir) }

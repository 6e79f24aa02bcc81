package netpol

import (
	"context"
	"fmt"
	"os"
	"time"

	"golang.org/x/sys/unix"
	"k8s.io/client-go/util/workqueue"

	"github.com/skiff-sh/skiff/actors/actorkit"
	"github.com/skiff-sh/skiff/actors/informer"
	"github.com/skiff-sh/skiff/bpf/policy"
)

// Producer returns the actor producer to give to actorkit.System.Spawn. Every incarnation
// loads the programs afresh and adopts the pinned maps and links, so a restart changes
// nothing a packet can see.
func (e *Enforcer) Producer() func() actorkit.Actor {
	return func() actorkit.Actor {
		a := &enforcerActor{e: e}
		return &informer.WorkLoop{Name: "netpol sync", Fault: FaultEvent(e.cfg.NodeName), Handlers: e.handlers,
			Cleanup: e.cfg.Cleanup, Start: a.start, Run: a.run, Stop: a.stop}
	}
}

// enforcerActor is what one incarnation of the enforcer's work loop holds.
type enforcerActor struct {
	e  *Enforcer
	q  workqueue.TypedRateLimitingInterface[string]
	dp *policy.Dataplane // set by run, read after it returned
}

// FaultEvent names the enforcer's event-handler fault point (actorkit.InjectPanic).
func FaultEvent(node string) string { return "netpol " + node + " event" }

// start publishes the incarnation's queue to the event handlers.
func (a *enforcerActor) start(in *informer.Incarnation) {
	a.q = in.Queue
	a.e.mu.Lock()
	a.e.queue = a.q
	a.e.mu.Unlock()
}

func (a *enforcerActor) run(ctx context.Context, in *informer.Incarnation) {
	e := a.e
	dp := a.load(ctx)
	if dp == nil {
		return
	}
	// The veths already on the bridge get the programs first; the watcher then publishes the
	// dataplane, with which each new pod's sandbox attaches to its own veth (Protect).
	in.Go("netpol links", func(ctx context.Context) { e.watchLinks(ctx, dp) })
	if !e.pods.WaitForSync(ctx) || !e.nss.WaitForSync(ctx) || !e.pols.WaitForSync(ctx) {
		return
	}
	resynced := actorkit.Retry(ctx, 10*time.Millisecond, 5*time.Second, func() error { return e.resync(dp) }, func(err error) {
		e.cfg.Logger.Warn("netpol resync failed; retrying", "node", e.cfg.NodeName, "err", err)
	})
	if !resynced {
		return
	}
	e.mu.Lock()
	e.synced = true
	e.mu.Unlock()
	actorkit.Drain(ctx, a.q, func(key string) error { return e.syncPod(dp, key) }, func(key string, err error) {
		e.cfg.Logger.Warn("netpol sync failed; requeued", "pod", key, "err", err)
	})
}

// load loads the dataplane and writes the host addresses, retrying until it works or ctx ends.
func (a *enforcerActor) load(ctx context.Context) *policy.Dataplane {
	e := a.e
	actorkit.Retry(ctx, 100*time.Millisecond, 10*time.Second, func() (err error) {
		if a.dp, err = e.open(); err != nil {
			e.mu.Lock()
			e.loadErr = err // for the sandboxes that wait in vain
			e.mu.Unlock()
		}
		return err
	}, func(err error) { e.cfg.Logger.Error("netpol dataplane", "node", e.cfg.NodeName, "err", err) })
	return a.dp
}

func (e *Enforcer) open() (*policy.Dataplane, error) {
	if err := ensureBPFFS("/sys/fs/bpf"); err != nil {
		return nil, err
	}
	dp, err := policy.Load(e.cfg.PinDir)
	if err != nil {
		return nil, err
	}
	if err := dp.SetHostAddrs(e.cfg.HostAddrs); err != nil {
		dp.Close()
		return nil, fmt.Errorf("netpol: host addresses: %w", err)
	}
	return dp, nil
}

// ensureBPFFS mounts bpffs at root unless it is one already (the node's first eBPF user).
func ensureBPFFS(root string) error {
	var fs unix.Statfs_t
	if err := unix.Statfs(root, &fs); err == nil && fs.Type == unix.BPF_FS_MAGIC {
		return nil
	}
	if err := os.MkdirAll(root, 0o755); err != nil {
		return err
	}
	if err := unix.Mount("bpf", root, "bpf", 0, ""); err != nil && err != unix.EBUSY {
		return fmt.Errorf("mount bpffs at %s: %w", root, err)
	}
	return nil
}

// stop ends the incarnation once its goroutines returned: the pinned links and maps keep
// enforcing, or are removed when cleanup is asked for.
func (a *enforcerActor) stop(cleanup bool) {
	e := a.e
	e.mu.Lock()
	if e.queue == a.q {
		e.queue = nil
	}
	e.synced = false
	e.unpublishLocked(a.dp)
	e.mu.Unlock()
	var err error
	switch {
	case cleanup && a.dp != nil:
		err = a.dp.Remove()
	case cleanup:
		err = os.RemoveAll(e.cfg.PinDir)
	case a.dp != nil:
		err = a.dp.Close()
	}
	if err != nil {
		e.cfg.Logger.Warn("netpol stop", "node", e.cfg.NodeName, "cleanup", cleanup, "err", err)
	}
	a.dp = nil
}

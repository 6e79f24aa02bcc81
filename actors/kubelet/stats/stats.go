// Package stats samples the node's cgroups for the resource metrics API: the node's and each
// running container's cumulative CPU time and memory working set, read on a timer by a
// supervised actor. A sample's CPU usage is the rate between it and the one before (cumulative
// usage over a window, as metrics-server computes it), so a figure needs two samples.
package stats

import (
	"context"
	"log/slog"
	"sync"
	"time"

	"github.com/skiff-sh/skiff/actors/actorkit"
	kruntime "github.com/skiff-sh/skiff/actors/kubelet/runtime"
	"github.com/skiff-sh/skiff/actors/nodeapi"
)

// DefaultInterval is how often the cgroups are read (the kubelet's housekeeping interval).
const DefaultInterval = 10 * time.Second

// Config is what the sampler reads.
type Config struct {
	Cgroups    Cgroups
	Containers func(context.Context) ([]kruntime.RunningContainer, error)
	Interval   time.Duration
	Logger     *slog.Logger
}

// Sampler keeps the latest usage figures; Latest is safe to call from any goroutine (the node
// API's handler).
type Sampler struct {
	cfg Config

	mu     sync.Mutex
	latest nodeapi.MetricsReply
}

// New returns a sampler; run it with Producer.
func New(cfg Config) *Sampler {
	if cfg.Interval <= 0 {
		cfg.Interval = DefaultInterval
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	return &Sampler{cfg: cfg}
}

// Latest is the newest figures: the node's (nil until two samples) and each running
// container's that was seen in two samples in a row.
func (s *Sampler) Latest() nodeapi.MetricsReply {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.latest
}

// Producer makes the sampling actor. A restarted incarnation starts from no history, so its
// first figures come after two samples.
func (s *Sampler) Producer() func() actorkit.Actor {
	return func() actorkit.Actor { return &actor{s: s, w: &window{}} }
}

// sampled is one round of readings, taken by the actor's timer goroutine.
type sampled struct {
	at         time.Time
	node       *reading
	containers map[kruntime.RunningContainer]reading
}

type actor struct {
	s *Sampler
	w *window
}

func (a *actor) Receive(actx actorkit.Context) {
	switch m := actx.Message().(type) {
	case *actorkit.Started:
		self, sys := actx.Self(), actorkit.SystemOf(actx)
		actorkit.Go(actx, "stats timer", func(ctx context.Context) {
			t := time.NewTicker(a.s.cfg.Interval)
			defer t.Stop()
			for {
				sys.Send(self, a.s.read(ctx))
				select {
				case <-ctx.Done():
					return
				case <-t.C:
				}
			}
		})
	case *sampled:
		reply := a.w.observe(m)
		a.s.mu.Lock()
		a.s.latest = reply
		a.s.mu.Unlock()
	}
}

// read takes one round; a cgroup that cannot be read (its container just exited) is left out.
func (s *Sampler) read(ctx context.Context) *sampled {
	m := &sampled{at: time.Now(), containers: map[kruntime.RunningContainer]reading{}}
	if r, err := s.cfg.Cgroups.Read(""); err == nil {
		m.node = &r
	} else {
		s.cfg.Logger.Warn("reading node cgroup", "err", err)
	}
	cs, err := s.cfg.Containers(ctx)
	if err != nil {
		s.cfg.Logger.Warn("listing containers for stats", "err", err)
	}
	for _, c := range cs {
		if r, err := s.cfg.Cgroups.Read(c.Cgroup); err == nil {
			m.containers[c] = r
		}
	}
	return m
}

// window holds the previous sample, from which the next one's rates are computed.
type window struct {
	prev *sampled
}

func (w *window) observe(cur *sampled) nodeapi.MetricsReply {
	var out nodeapi.MetricsReply
	prev := w.prev
	w.prev = cur
	if prev == nil || !cur.at.After(prev.at) {
		return out
	}
	if cur.node != nil && prev.node != nil {
		u := usage(prev.at, cur.at, *prev.node, *cur.node)
		out.Node = &u
	}
	for c, r := range cur.containers {
		if p, ok := prev.containers[c]; ok {
			out.Containers = append(out.Containers, nodeapi.ContainerUsage{PodUID: c.PodUID, Name: c.Name, Usage: usage(prev.at, cur.at, p, r)})
		}
	}
	return out
}

// usage is the CPU rate between two readings (zero if the counter went back: a new cgroup
// under the same name) and the later working set.
func usage(from, to time.Time, a, b reading) nodeapi.Usage {
	win := to.Sub(from)
	u := nodeapi.Usage{Timestamp: to, Window: win, MemoryBytes: b.workingSet}
	if b.cpuNanos >= a.cpuNanos {
		u.CPUNanoCores = uint64(float64(b.cpuNanos-a.cpuNanos) / win.Seconds())
	}
	return u
}

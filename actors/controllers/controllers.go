// Package controllers starts Skiff's controller actors (one package per controller below
// this one): the list `skiff server --controllers` and the control plane pick from.
package controllers

import (
	"fmt"
	"log/slog"
	"time"

	"github.com/skiff-sh/skiff/actors/actorkit"
	"github.com/skiff-sh/skiff/actors/apiclient"
	"github.com/skiff-sh/skiff/actors/controllers/daemonset"
	"github.com/skiff-sh/skiff/actors/controllers/deployment"
	"github.com/skiff-sh/skiff/actors/controllers/endpointslice"
	"github.com/skiff-sh/skiff/actors/controllers/garbagecollector"
	"github.com/skiff-sh/skiff/actors/controllers/nodelifecycle"
	"github.com/skiff-sh/skiff/actors/controllers/replicaset"
	"github.com/skiff-sh/skiff/bus/statelog"
)

// Controller names: the names of their actors, and of the components that run them.
const (
	Deployment       = "deployment"
	ReplicaSet       = "replicaset"
	GarbageCollector = "garbagecollector"
	NodeLifecycle    = "nodelifecycle"
	EndpointSlice    = "endpointslice"
	DaemonSet        = "daemonset"
)

// All lists every controller.
var All = []string{Deployment, ReplicaSet, GarbageCollector, NodeLifecycle, EndpointSlice, DaemonSet}

// Options tune the controllers; zero values take Kubernetes' defaults.
type Options struct {
	Workers int // per controller; default 2

	NodeGracePeriod    time.Duration // lease silence before a node is NotReady (40 s)
	PodEvictionTimeout time.Duration // default toleration of not-ready/unreachable (300 s)
	NodeMonitorPeriod  time.Duration // node re-check period (5 s)
}

// Deps are what every controller needs.
type Deps struct {
	Log    *statelog.Log
	Client *apiclient.Client
	Logger *slog.Logger
}

// Start spawns the named controllers (from All) as supervised actors of those names.
func Start(sys *actorkit.System, d Deps, names []string, o Options) ([]*actorkit.PID, error) {
	var pids []*actorkit.PID
	for _, name := range names {
		var producer func() actorkit.Actor
		switch name {
		case Deployment:
			producer = deployment.New(deployment.Config{Log: d.Log, Client: d.Client, Workers: o.Workers, Logger: d.Logger})
		case ReplicaSet:
			producer = replicaset.New(replicaset.Config{Log: d.Log, Client: d.Client, Workers: o.Workers, Logger: d.Logger})
		case GarbageCollector:
			producer = garbagecollector.New(garbagecollector.Config{Log: d.Log, Client: d.Client, Workers: o.Workers, Logger: d.Logger})
		case NodeLifecycle:
			producer = nodelifecycle.New(nodelifecycle.Config{Log: d.Log, Client: d.Client, Workers: o.Workers, Logger: d.Logger,
				GracePeriod: o.NodeGracePeriod, PodEvictionTimeout: o.PodEvictionTimeout, MonitorPeriod: o.NodeMonitorPeriod})
		case EndpointSlice:
			producer = endpointslice.New(endpointslice.Config{Log: d.Log, Client: d.Client, Workers: o.Workers, Logger: d.Logger})
		case DaemonSet:
			producer = daemonset.New(daemonset.Config{Log: d.Log, Client: d.Client, Workers: o.Workers, Logger: d.Logger})
		default:
			return pids, fmt.Errorf("unknown controller %q (known: %v)", name, All)
		}
		pid, err := sys.Spawn(name, producer)
		if err != nil {
			return pids, err
		}
		pids = append(pids, pid)
	}
	return pids, nil
}

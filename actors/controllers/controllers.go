// Package controllers starts Skiff's controller actors (one package per controller below
// this one): the list `skiff server --controllers` and the control plane pick from.
package controllers

import (
	"fmt"
	"log/slog"
	"time"

	"github.com/skiff-sh/skiff/actors/actorkit"
	"github.com/skiff-sh/skiff/actors/apiclient"
	"github.com/skiff-sh/skiff/actors/controllers/controllerkit"
	"github.com/skiff-sh/skiff/actors/controllers/cronjob"
	"github.com/skiff-sh/skiff/actors/controllers/daemonset"
	"github.com/skiff-sh/skiff/actors/controllers/deployment"
	"github.com/skiff-sh/skiff/actors/controllers/disruption"
	"github.com/skiff-sh/skiff/actors/controllers/endpoints"
	"github.com/skiff-sh/skiff/actors/controllers/endpointslice"
	"github.com/skiff-sh/skiff/actors/controllers/garbagecollector"
	"github.com/skiff-sh/skiff/actors/controllers/job"
	"github.com/skiff-sh/skiff/actors/controllers/nodelifecycle"
	"github.com/skiff-sh/skiff/actors/controllers/persistentvolume"
	"github.com/skiff-sh/skiff/actors/controllers/podautoscaler"
	"github.com/skiff-sh/skiff/actors/controllers/pvcprotection"
	"github.com/skiff-sh/skiff/actors/controllers/replicaset"
	"github.com/skiff-sh/skiff/actors/controllers/serviceaccount"
	"github.com/skiff-sh/skiff/actors/controllers/servicelb"
	"github.com/skiff-sh/skiff/actors/controllers/statefulset"
	"github.com/skiff-sh/skiff/actors/controllers/ttlafterfinished"
	"github.com/skiff-sh/skiff/actors/informer"
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
	ServiceAccount   = "serviceaccount"
	RootCAPublisher  = "root-ca-cert-publisher"
	Job              = "job"
	CronJob          = "cronjob"
	TTLAfterFinished = "ttlafterfinished"
	Disruption       = "disruption"
	Endpoints        = "endpoints"
	StatefulSet      = "statefulset"
	PersistentVolume = "persistentvolume-binder"
	PVCProtection    = "pvc-protection"
	ServiceLB        = "service-lb"
	PodAutoscaler    = "horizontalpodautoscaling"
)

// All lists every controller.
var All = []string{Deployment, ReplicaSet, GarbageCollector, NodeLifecycle, EndpointSlice, DaemonSet, ServiceAccount, RootCAPublisher, Job, CronJob, TTLAfterFinished, Disruption, Endpoints, StatefulSet, PersistentVolume, PVCProtection, ServiceLB, PodAutoscaler}

// Options tune the controllers; zero values take Kubernetes' defaults.
type Options struct {
	Workers int // per controller; default 2

	NodeGracePeriod    time.Duration // lease silence before a node is NotReady (40 s)
	PodEvictionTimeout time.Duration // default toleration of not-ready/unreachable (300 s)
	NodeMonitorPeriod  time.Duration // node re-check period (5 s)

	// RootCA (PEM) is what the root CA publisher puts in every namespace's kube-root-ca.crt:
	// the CA the apiserver's serving certificate chains to (kube's --root-ca-file). Without
	// one (an API served without TLS) that controller is not started.
	RootCA        []byte
	JobBackoff    time.Duration // delay after a Job's first failed pod, doubling per failure (10 s)
	HPASyncPeriod time.Duration // how often each HorizontalPodAutoscaler is evaluated (15 s)
}

// Deps are what every controller needs.
type Deps struct {
	Log       *statelog.Log
	Informers *informer.Factory // the process's shared informers
	Client    *apiclient.Client
	Logger    *slog.Logger
}

// Manager is the name of the actor that parents the controllers (as kube-controller-manager
// hosts them): each controller is its child, so a failing one restarts alone.
const Manager = "controller-manager"

// Start spawns the controller manager actor with the named controllers (from All) as its
// supervised children, each named after its controller.
func Start(sys *actorkit.System, d Deps, names []string, o Options) ([]*actorkit.PID, error) {
	producers := make([]func() actorkit.Actor, len(names))
	for i, name := range names {
		cfg := controllerkit.Config{Informers: d.Informers, Client: d.Client, Workers: o.Workers, Logger: d.Logger}
		switch name {
		case Deployment:
			producers[i] = deployment.New(cfg)
		case ReplicaSet:
			producers[i] = replicaset.New(cfg)
		case GarbageCollector:
			producers[i] = garbagecollector.New(garbagecollector.Config{Informers: d.Informers, Client: d.Client, Workers: o.Workers, Logger: d.Logger})
		case NodeLifecycle:
			producers[i] = nodelifecycle.New(nodelifecycle.Config{Informers: d.Informers, Client: d.Client, Workers: o.Workers, Logger: d.Logger,
				GracePeriod: o.NodeGracePeriod, PodEvictionTimeout: o.PodEvictionTimeout, MonitorPeriod: o.NodeMonitorPeriod})
		case EndpointSlice:
			producers[i] = endpointslice.New(cfg)
		case DaemonSet:
			producers[i] = daemonset.New(cfg)
		case ServiceAccount:
			producers[i] = serviceaccount.New(cfg)
		case RootCAPublisher:
			if len(o.RootCA) == 0 {
				d.Logger.Info("root-ca-cert-publisher not started: no CA (the API is served without TLS), so no kube-root-ca.crt ConfigMaps")
				continue
			}
			producers[i] = serviceaccount.NewRootCAPublisher(cfg, o.RootCA)
		case Job:
			producers[i] = job.New(job.Config{Informers: d.Informers, Client: d.Client, Workers: o.Workers, Logger: d.Logger, Backoff: o.JobBackoff})
		case CronJob:
			producers[i] = cronjob.New(cronjob.Config{Informers: d.Informers, Client: d.Client, Workers: o.Workers, Logger: d.Logger})
		case TTLAfterFinished:
			producers[i] = ttlafterfinished.New(cfg)
		case PodAutoscaler:
			producers[i] = podautoscaler.New(podautoscaler.Config{Informers: d.Informers, Client: d.Client, Workers: o.Workers, Logger: d.Logger, SyncPeriod: o.HPASyncPeriod})
		case Disruption:
			producers[i] = disruption.New(cfg)
		case Endpoints:
			producers[i] = endpoints.New(cfg)
		case ServiceLB:
			producers[i] = servicelb.New(cfg)
		case StatefulSet:
			producers[i] = statefulset.New(cfg)
		case PersistentVolume:
			producers[i] = persistentvolume.New(cfg)
		case PVCProtection:
			producers[i] = pvcprotection.New(cfg)
		default:
			return nil, fmt.Errorf("unknown controller %q (known: %v)", name, All)
		}
	}
	pid, err := sys.Spawn(Manager, func() actorkit.Actor { return &manager{names: names, producers: producers} })
	if err != nil {
		return nil, err
	}
	return []*actorkit.PID{pid}, nil
}

type manager struct {
	names     []string
	producers []func() actorkit.Actor
}

func (m *manager) Receive(ctx actorkit.Context) {
	if _, ok := ctx.Message().(*actorkit.Started); !ok {
		return
	}
	for i, name := range m.names {
		if m.producers[i] == nil {
			continue // not started (see Start)
		}
		if _, err := actorkit.SpawnChild(ctx, name, m.producers[i]); err != nil {
			panic(err) // restarts the manager (and its children) after back-off
		}
	}
}

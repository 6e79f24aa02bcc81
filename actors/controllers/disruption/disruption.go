// Package disruption keeps the status of PodDisruptionBudgets, as kube-controller-manager's
// disruption controller does: how many of the selected pods are healthy, how many must be,
// how many are expected (from the owning controllers' scale for percentages and
// maxUnavailable), and so how many disruptions the eviction subresource may allow now.
package disruption

import (
	"time"

	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"

	"github.com/skiff-sh/skiff/actors/actorkit"
	"github.com/skiff-sh/skiff/actors/apiclient"
	"github.com/skiff-sh/skiff/actors/controllers/controllerkit"
	"github.com/skiff-sh/skiff/actors/events"
	"github.com/skiff-sh/skiff/actors/informer"
)

// Name is the controller's name in logs and Events.
const Name = "disruption-controller"

// DeletionTimeout is how long an eviction's entry in status.disruptedPods keeps the pod out of
// the healthy count while its deletion has not been seen, as in Kubernetes (2 minutes).
const DeletionTimeout = 2 * time.Minute

// Config configures the controller.
type Config = controllerkit.Config

type controller struct {
	client  *apiclient.Client
	pdbs    *informer.Informer
	pods    *informer.Informer
	rss     *informer.Informer
	deploys *informer.Informer
	sets    *informer.Informer
	queue   *controllerkit.Queue
	rec     *events.Recorder
	now     func() time.Time
}

// New returns the producer of the disruption controller actor.
func New(cfg Config) func() actorkit.Actor {
	c := &controller{
		client:  cfg.Client,
		pdbs:    cfg.Informers.For("policy", "poddisruptionbudgets"),
		pods:    cfg.Informers.For("", "pods"),
		rss:     cfg.Informers.For("apps", "replicasets"),
		deploys: cfg.Informers.For("apps", "deployments"),
		sets:    cfg.Informers.For("apps", "statefulsets"),
		queue:   &controllerkit.Queue{},
		rec:     events.New(cfg.Client, Name, ""),
		now:     time.Now,
	}
	pods := informer.Funcs{
		Add: func(o runtime.Object) { c.podChanged(o.(*corev1.Pod)) },
		Update: func(old, o runtime.Object) {
			op, np := old.(*corev1.Pod), o.(*corev1.Pod)
			c.podChanged(np)
			if !labels.Equals(op.Labels, np.Labels) {
				c.podChanged(op) // the budgets it left
			}
		},
		Delete: func(o runtime.Object) { c.podChanged(o.(*corev1.Pod)) },
	}
	ctl := &controllerkit.Controller{
		Name:    Name,
		Workers: cfg.Workers,
		Watches: []controllerkit.Watch{{Informer: c.pdbs, Handler: controllerkit.OnChange(c.queue.Enqueue)}, {Informer: c.pods, Handler: pods}},
		// The owners' scale is read at sync time; a scale change shows as pods coming or going.
		WaitFor:   []*informer.Informer{c.rss, c.deploys, c.sets},
		Queue:     c.queue,
		Reconcile: c.sync,
		Resync:    controllerkit.ForEach(c.pdbs, c.queue.Enqueue),
		Logger:    cfg.Logger,
	}
	return ctl.Producer()
}

// podChanged wakes the budgets of the pod's namespace that select it.
func (c *controller) podChanged(p *corev1.Pod) {
	for _, pdb := range c.budgetsOf(p) {
		c.queue.Add(controllerkit.KeyOf(pdb))
	}
}

// budgetsOf are the PDBs selecting p. In policy/v1 an empty selector selects every pod of the
// namespace, a missing one none.
func (c *controller) budgetsOf(p *corev1.Pod) []*policyv1.PodDisruptionBudget {
	var out []*policyv1.PodDisruptionBudget
	for _, o := range c.pdbs.ByIndex(informer.IndexNamespace, p.Namespace) {
		pdb := o.(*policyv1.PodDisruptionBudget)
		if sel, err := metav1.LabelSelectorAsSelector(pdb.Spec.Selector); err == nil && sel.Matches(labels.Set(p.Labels)) {
			out = append(out, pdb)
		}
	}
	return out
}

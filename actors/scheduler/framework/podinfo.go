package framework

import (
	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/types"

	"github.com/skiff-sh/skiff/schemas/podspec"
)

// hostnameKey is the topology key whose domain is a single node. A node without the label
// is its own domain (its name), so per-node rules hold even on nodes nobody labelled.
const hostnameKey = v1.LabelHostname

// podInfo is a pod with everything the scheduler derives from it computed once.
type podInfo struct {
	pod     *v1.Pod
	key     string
	req     Resource
	nonZero Resource
	ports   []hostPort
	owner   types.UID // controller owner, "" when none
	anti    []affinityTerm
	// labelIDs are the interned labels and ownerID the interned owner (0: none); set only
	// for pods counted in a cache.
	labelIDs []uint32
	ownerID  uint32
}

// affinityTerm is a compiled required (anti-)affinity term.
type affinityTerm struct {
	selector    labels.Selector
	namespaces  map[string]struct{} // nil with allNS false: only the owner pod's namespace
	allNS       bool
	ownerNS     string
	topologyKey string
}

// matches reports whether p falls under the term.
func (t *affinityTerm) matches(p *v1.Pod) bool {
	if !t.allNS {
		if t.namespaces == nil {
			if p.Namespace != t.ownerNS {
				return false
			}
		} else if _, ok := t.namespaces[p.Namespace]; !ok {
			return false
		}
	}
	return t.selector.Matches(labels.Set(p.Labels))
}

func podKey(p *v1.Pod) string {
	if p.UID != "" {
		return string(p.UID)
	}
	return p.Namespace + "/" + p.Name
}

func newPodInfo(p *v1.Pod) *podInfo {
	pi := &podInfo{pod: p, key: podKey(p), ports: podHostPorts(p)}
	pi.req, pi.nonZero = podRequests(p)
	if ref := metav1.GetControllerOfNoCopy(p); ref != nil {
		pi.owner = ref.UID
	}
	if a := p.Spec.Affinity; a != nil && a.PodAntiAffinity != nil {
		pi.anti = compileTerms(p, a.PodAntiAffinity.RequiredDuringSchedulingIgnoredDuringExecution)
	}
	return pi
}

// compileTerms compiles terms; a term with an invalid selector matches nothing (the API
// validates selectors, so this only guards against hand-made objects).
func compileTerms(owner *v1.Pod, terms []v1.PodAffinityTerm) []affinityTerm {
	out := make([]affinityTerm, 0, len(terms))
	for i := range terms {
		t := &terms[i]
		sel := labels.Nothing()
		if t.LabelSelector != nil {
			if s, err := metav1.LabelSelectorAsSelector(t.LabelSelector); err == nil {
				sel = s
			}
		}
		at := affinityTerm{selector: sel, ownerNS: owner.Namespace, topologyKey: t.TopologyKey}
		// Without namespace objects to label-match, an empty namespaceSelector ({}) means
		// every namespace and a non-empty one adds nothing beyond the listed namespaces.
		if t.NamespaceSelector != nil && len(t.NamespaceSelector.MatchLabels) == 0 && len(t.NamespaceSelector.MatchExpressions) == 0 {
			at.allNS = true
		} else if len(t.Namespaces) > 0 || t.NamespaceSelector != nil {
			at.namespaces = make(map[string]struct{}, len(t.Namespaces))
			for _, ns := range t.Namespaces {
				at.namespaces[ns] = struct{}{}
			}
		}
		out = append(out, at)
	}
	return out
}

// hostPort is one host port a pod claims; ip "0.0.0.0" stands for every address.
type hostPort struct {
	ip       string
	protocol v1.Protocol
	port     int32
}

const anyIP = "0.0.0.0"

func podHostPorts(p *v1.Pod) []hostPort {
	var out []hostPort
	add := func(cs []v1.Container, sidecarsOnly bool) {
		for i := range cs {
			if sidecarsOnly && !podspec.IsSidecar(&cs[i]) {
				continue // a plain init container has exited before the app containers bind
			}
			for _, cp := range cs[i].Ports {
				if cp.HostPort <= 0 {
					continue
				}
				hp := hostPort{ip: cp.HostIP, protocol: cp.Protocol, port: cp.HostPort}
				if hp.ip == "" {
					hp.ip = anyIP
				}
				if hp.protocol == "" {
					hp.protocol = v1.ProtocolTCP
				}
				out = append(out, hp)
			}
		}
	}
	add(p.Spec.InitContainers, true)
	add(p.Spec.Containers, false)
	return out
}

// terminal pods hold no resources on their node any more.
func terminal(p *v1.Pod) bool {
	return p.Status.Phase == v1.PodSucceeded || p.Status.Phase == v1.PodFailed
}

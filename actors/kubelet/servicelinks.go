package kubelet

import (
	"fmt"
	"net"
	"sort"
	"strconv"
	"strings"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/skiff-sh/skiff/actors/informer"
)

// serviceEnv is the Service variables of a pod, as Kubernetes' kubelet sets them: the
// `kubernetes` Service of `default` always, and with enableServiceLinks every Service of the
// pod's namespace that has a cluster IP, each as NAME_SERVICE_HOST/_PORT[_PORTNAME] plus the
// Docker link variables.
func (k *kubelet) serviceEnv(pod *corev1.Pod) *envList {
	env := &envList{vals: map[string]string{}}
	if k.services == nil {
		return env
	}
	byName := map[string]*corev1.Service{}
	if o, ok := k.services.Get(metav1.NamespaceDefault, "kubernetes"); ok {
		byName["kubernetes"] = o.(*corev1.Service)
	}
	if pod.Spec.EnableServiceLinks == nil || *pod.Spec.EnableServiceLinks {
		for _, o := range k.services.ByIndex(informer.IndexNamespace, pod.Namespace) {
			s := o.(*corev1.Service)
			if _, master := byName[s.Name]; !master { // the master Service's name wins
				byName[s.Name] = s
			}
		}
	}
	names := make([]string, 0, len(byName))
	for n := range byName {
		names = append(names, n)
	}
	sort.Strings(names)
	for _, n := range names {
		serviceVars(byName[n], env)
	}
	return env
}

func envName(s string) string { return strings.ToUpper(strings.ReplaceAll(s, "-", "_")) }

func serviceVars(s *corev1.Service, env *envList) {
	ip := s.Spec.ClusterIP
	if ip == "" || ip == corev1.ClusterIPNone || len(s.Spec.Ports) == 0 {
		return
	}
	prefix := envName(s.Name)
	env.set(prefix+"_SERVICE_HOST", ip)
	env.set(prefix+"_SERVICE_PORT", strconv.Itoa(int(s.Spec.Ports[0].Port)))
	for _, p := range s.Spec.Ports {
		if p.Name != "" {
			env.set(prefix+"_SERVICE_PORT_"+envName(p.Name), strconv.Itoa(int(p.Port)))
		}
	}
	for i, p := range s.Spec.Ports {
		proto := string(corev1.ProtocolTCP)
		if p.Protocol != "" {
			proto = string(p.Protocol)
		}
		lower, port := strings.ToLower(proto), strconv.Itoa(int(p.Port))
		url := fmt.Sprintf("%s://%s", lower, net.JoinHostPort(ip, port))
		if i == 0 {
			env.set(prefix+"_PORT", url)
		}
		pp := fmt.Sprintf("%s_PORT_%d_%s", prefix, p.Port, strings.ToUpper(proto))
		env.set(pp, url)
		env.set(pp+"_PROTO", lower)
		env.set(pp+"_PORT", port)
		env.set(pp+"_ADDR", ip)
	}
}

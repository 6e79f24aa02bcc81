package nodeport

import "github.com/cilium/ebpf"

// Programs exposes the ingress and egress programs to the tests (BPF_PROG_TEST_RUN).
func Programs(d *Dataplane) (ingress, egress *ebpf.Program) {
	return d.objs.SkiffNpIngress, d.objs.SkiffNpEgress
}

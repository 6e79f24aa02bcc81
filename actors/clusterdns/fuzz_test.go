package clusterdns

import (
	"context"
	"testing"

	"github.com/miekg/dns"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// Any datagram a pod sends that decodes as a DNS message gets a reply that packs, within the
// size the client can take over UDP, and no query reaches an upstream that is not there.
func FuzzAnswer(f *testing.F) {
	z := &zone{idx: newIndex("cluster.local."), fwd: newForwarder(nil), log: func(string, ...any) {}}
	svc := &corev1.Service{ObjectMeta: metav1.ObjectMeta{Name: "web", Namespace: "default"},
		Spec: corev1.ServiceSpec{ClusterIP: "10.96.0.20", Ports: []corev1.ServicePort{{Name: "http", Port: 80}}}}
	z.idx.set("default/web", serviceRecords(toService(svc), nil, z.idx.zone))
	ext := &corev1.Service{ObjectMeta: metav1.ObjectMeta{Name: "ext", Namespace: "default"},
		Spec: corev1.ServiceSpec{Type: corev1.ServiceTypeExternalName, ExternalName: "web.default.svc.cluster.local"}}
	z.idx.set("default/ext", serviceRecords(toService(ext), nil, z.idx.zone))
	for _, q := range []struct {
		name  string
		qtype uint16
	}{{"web.default.svc.cluster.local.", dns.TypeA}, {"_http._tcp.web.default.svc.cluster.local.", dns.TypeSRV},
		{"20.0.96.10.in-addr.arpa.", dns.TypePTR}, {"ext.default.svc.cluster.local.", dns.TypeA}, {"cluster.local.", dns.TypeANY}, {"example.com.", dns.TypeA},
		{"10-1-2-3.default.pod.cluster.local.", dns.TypeA}} {
		m := new(dns.Msg)
		m.SetQuestion(q.name, q.qtype)
		m.SetEdns0(600, true)
		b, _ := m.Pack()
		f.Add(b)
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		req := new(dns.Msg)
		if req.Unpack(data) != nil || req.Response {
			return
		}
		m := z.answer(context.Background(), req)
		fit(req, m, true)
		b, err := m.Pack()
		if err != nil {
			t.Fatalf("reply to %v does not pack: %v", req, err)
		}
		if limit := dns.DefaultMsgSize; len(b) > limit {
			t.Fatalf("UDP reply of %d bytes", len(b))
		}
	})
}

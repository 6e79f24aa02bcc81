package e2e

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"

	"github.com/skiff-sh/skiff/schemas"
	"github.com/skiff-sh/skiff/testkit/echoapp"
	"github.com/skiff-sh/skiff/testkit/testutil"
)

var webSet = fmt.Sprintf(`
apiVersion: v1
kind: Service
metadata: {name: web}
spec:
  clusterIP: None
  selector: {app: web}
  ports: [{name: http, port: 80, targetPort: 8080}]
---
apiVersion: apps/v1
kind: StatefulSet
metadata: {name: web}
spec:
  serviceName: web
  replicas: 3
  selector: {matchLabels: {app: web}}
  template:
    metadata: {labels: {app: web}}
    spec:
      terminationGracePeriodSeconds: 1
      containers:
      - name: echo
        image: %s
        readinessProbe:
          httpGet: {path: /ready, port: 8080}
          periodSeconds: 1
        volumeMounts: [{name: data, mountPath: /data}]
  volumeClaimTemplates:
  - metadata: {name: data}
    spec:
      accessModes: [ReadWriteOnce]
      resources: {requests: {storage: 64Mi}}
`, echoapp.Image)

// A StatefulSet of 3 with a claim template on a real node: web-0..2 start in order, each on
// its own local-path volume, every pod bound only once its claim is (no FailedMount); a file
// web-1 writes survives deleting web-1, which comes back with the same name, claim, volume
// and node.
func statefulSetKeepsEachPodsVolume(t *testing.T, n *node) {
	start := time.Now()
	n.apply(t, webSet)
	// OrderedReady: web-k exists only once web-0..k-1 are Ready.
	testutil.Eventually(t, 120*time.Second, 50*time.Millisecond, func() error {
		pods := map[string]*corev1.Pod{}
		for _, p := range n.pods(t, "app=web") {
			pods[p.Name] = p
		}
		for i := 1; i < 3; i++ {
			if pods[fmt.Sprintf("web-%d", i)] == nil {
				continue
			}
			for j := range i {
				if prev := pods[fmt.Sprintf("web-%d", j)]; prev == nil || !ready(prev) {
					t.Fatalf("web-%d exists while web-%d is not ready", i, j)
				}
			}
		}
		return wantReady(pods, 3)
	})

	t.Logf("web-0..2 ready in order after %s", elapsed(start))
	volumes := map[string]string{} // claim -> volume
	for i := range 3 {
		pvc := getObj[*corev1.PersistentVolumeClaim](t, n, "persistentvolumeclaims", "default", fmt.Sprintf("data-web-%d", i))
		pv := getObj[*corev1.PersistentVolume](t, n, "persistentvolumes", "", pvc.Spec.VolumeName)
		if pvc.Status.Phase != corev1.ClaimBound || pv.Spec.HostPath == nil || pv.Spec.ClaimRef == nil || pv.Spec.ClaimRef.UID != pvc.UID {
			t.Fatalf("claim %s %s -> volume %s %+v", pvc.Name, pvc.Status.Phase, pv.Name, pv.Spec)
		}
		volumes[pvc.Name] = pv.Name
	}
	if len(map[string]bool{volumes["data-web-0"]: true, volumes["data-web-1"]: true, volumes["data-web-2"]: true}) != 3 {
		t.Fatalf("volumes %v: want one per pod", volumes)
	}

	web1 := getObj[*corev1.Pod](t, n, "pods", "default", "web-1")
	if out, err := n.exec(t, web1, "-append", "/data/note=written by web-1"); err != nil {
		t.Fatalf("write: %v %s", err, out)
	}
	deletePod(t, n, "web-1")
	deleted := time.Now()
	var again *corev1.Pod
	testutil.Eventually(t, 60*time.Second, 100*time.Millisecond, func() error {
		p, err := getPod(n, "web-1")
		if err != nil {
			return err
		}
		if p.UID == web1.UID || !ready(p) {
			return fmt.Errorf("web-1 %s ready %v", p.UID, ready(p))
		}
		again = p
		return nil
	})
	t.Logf("web-1 back and ready %s after its deletion", elapsed(deleted))
	if out, err := n.exec(t, again, "-cat", "/data/note"); err != nil || out != "written by web-1\n" {
		t.Fatalf("after recreation /data/note = %q (%v)", out, err)
	}
	pvc := getObj[*corev1.PersistentVolumeClaim](t, n, "persistentvolumeclaims", "default", "data-web-1")
	if pvc.Spec.VolumeName != volumes["data-web-1"] || again.Spec.NodeName != web1.Spec.NodeName {
		t.Fatalf("web-1 again on %s with volume %s, was %s with %s", again.Spec.NodeName, pvc.Spec.VolumeName, web1.Spec.NodeName, volumes["data-web-1"])
	}
	if evs := eventsWithReason(t, n, "FailedMount"); len(evs) > 0 {
		t.Fatalf("FailedMount events: %v", evs)
	}
}

func wantReady(pods map[string]*corev1.Pod, want int) error {
	count := 0
	for _, p := range pods {
		if ready(p) {
			count++
		}
	}
	if count != want {
		return fmt.Errorf("%d of %d ready", count, want)
	}
	return nil
}

func getObj[T any](t *testing.T, n *node, resource, ns, name string) T {
	t.Helper()
	k, _ := schemas.ByResource("", "v1", resource)
	o, err := n.cp.Client.Get(context.Background(), k, ns, name)
	if err != nil {
		t.Fatalf("get %s %s: %v", resource, name, err)
	}
	return o.(T)
}

func getPod(n *node, name string) (*corev1.Pod, error) {
	k, _ := schemas.ByResource("", "v1", "pods")
	o, err := n.cp.Client.Get(context.Background(), k, "default", name)
	if err != nil {
		return nil, err
	}
	return o.(*corev1.Pod), nil
}

func deletePod(t *testing.T, n *node, name string) {
	t.Helper()
	k, _ := schemas.ByResource("", "v1", "pods")
	if err := n.cp.Client.Delete(context.Background(), k, "default", name, nil); err != nil {
		t.Fatal(err)
	}
}

// eventsWithReason lists the Events of default with that reason, as "object: message".
func eventsWithReason(t *testing.T, n *node, reason string) []string {
	t.Helper()
	k, _ := schemas.ByResource("", "v1", "events")
	objs, _, err := n.cp.Client.List(context.Background(), k, "default", nil)
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, o := range objs {
		if ev := o.(*corev1.Event); ev.Reason == reason {
			out = append(out, ev.InvolvedObject.Name+": "+strings.TrimSpace(ev.Message))
		}
	}
	return out
}

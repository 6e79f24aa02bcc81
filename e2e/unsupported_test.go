package e2e

import (
	"context"
	"fmt"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"

	"github.com/skiff-sh/skiff/schemas"
	"github.com/skiff-sh/skiff/testkit/testutil"
)

// A pod asking for what the node cannot do yet (init containers, volumes) is not run without
// it: its container waits with CreateContainerConfigError and says why.
func TestUnsupportedPodFeaturesAreRefusedNotSkipped(t *testing.T) {
	n := startNode(t)
	n.apply(t, `
apiVersion: v1
kind: Pod
metadata: {name: with-init}
spec:
  initContainers:
  - {name: setup, image: skiff.local/httpecho:v1, args: ["-version"]}
  containers:
  - {name: echo, image: skiff.local/httpecho:v1}
---
apiVersion: v1
kind: Pod
metadata: {name: with-volume}
spec:
  volumes:
  - {name: scratch, emptyDir: {}}
  containers:
  - name: echo
    image: skiff.local/httpecho:v1
    volumeMounts: [{name: scratch, mountPath: /scratch}]
`)
	k, _ := schemas.ByResource("", "v1", "pods")
	for _, name := range []string{"with-init", "with-volume"} {
		testutil.Eventually(t, 60*time.Second, 100*time.Millisecond, func() error {
			o, err := n.cp.Client.Get(context.Background(), k, "default", name)
			if err != nil {
				return err
			}
			p := o.(*corev1.Pod)
			for _, cs := range p.Status.ContainerStatuses {
				if cs.State.Waiting != nil && cs.State.Waiting.Reason == "CreateContainerConfigError" && cs.State.Waiting.Message != "" {
					if cs.State.Running != nil {
						return fmt.Errorf("%s runs", name)
					}
					return nil
				}
			}
			return fmt.Errorf("%s: statuses %+v", name, p.Status.ContainerStatuses)
		})
	}
}

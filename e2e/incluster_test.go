package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"slices"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/skiff-sh/skiff/actors/controlplane"
	"github.com/skiff-sh/skiff/deploy/images/examples"
	"github.com/skiff-sh/skiff/schemas"
	"github.com/skiff-sh/skiff/testkit/testutil"
)

// inClusterApp is an account allowed to list pods alone and a run of the incluster program as it.
const inClusterApp = `
apiVersion: v1
kind: ServiceAccount
metadata: {name: lister}
---
apiVersion: rbac.authorization.k8s.io/v1
kind: Role
metadata: {name: pod-lister}
rules:
- {apiGroups: [""], resources: [pods], verbs: [list]}
---
apiVersion: rbac.authorization.k8s.io/v1
kind: RoleBinding
metadata: {name: lister-lists-pods}
roleRef: {apiGroup: rbac.authorization.k8s.io, kind: Role, name: pod-lister}
subjects:
- {kind: ServiceAccount, name: lister, namespace: default}
---
apiVersion: v1
kind: Pod
metadata: {name: incluster}
spec:
  serviceAccountName: lister
  restartPolicy: Never
  containers:
  - {name: client, image: ` + examples.InCluster + `, args: [-wait=30s]}
`

// inClusterReport is what deploy/images/incluster reports.
type inClusterReport struct {
	Host    string `json:"host"`
	Results []struct {
		Call   string   `json:"call"`
		Code   int32    `json:"code"`
		Reason string   `json:"reason"`
		Names  []string `json:"names"`
		Error  string   `json:"error"`
	} `json:"results"`
}

// A program using client-go's rest.InClusterConfig unchanged reaches the apiserver through the
// `kubernetes` Service (the eBPF LB takes its ClusterIP to the address the apiserver advertises)
// with the token, CA and namespace automounted for its ServiceAccount: the list its Role allows
// succeeds, the one it does not is Forbidden.
func TestInClusterClientHasItsServiceAccountsRole(t *testing.T) {
	n := startNodeWith(t, []func(string) (string, error){examples.BuildInCluster}, func(c *controlplane.Config) {
		// Pods reach the host at their bridge's address (the pod CIDR's first, see startNode).
		c.Listen, c.AdvertiseAddress, c.APIAuth.Enabled = "0.0.0.0:0", "10.231.0.1", true
		c.ServiceAccountAdmission, c.AutomountServiceAccountTokens = true, true
		// Every agent on a host attaches to the one cgroup2 hierarchy: a range of its own keeps
		// the ClusterIP clear of other clusters' kubernetes Service (10.96.0.1).
		c.ServiceCIDR = "10.97.0.0/16"
	})
	n.apply(t, inClusterApp)

	k, _ := schemas.ByResource("", "v1", "pods")
	var status corev1.ContainerStateTerminated
	testutil.Eventually(t, 2*time.Minute, 200*time.Millisecond, func() error {
		o, err := n.cp.Client.Get(context.Background(), k, "default", "incluster")
		if err != nil {
			return err
		}
		p := o.(*corev1.Pod)
		if len(p.Status.ContainerStatuses) == 0 || p.Status.ContainerStatuses[0].State.Terminated == nil {
			return fmt.Errorf("pod %s: not finished", p.Status.Phase)
		}
		status = *p.Status.ContainerStatuses[0].State.Terminated
		return nil
	})
	if status.ExitCode != 0 {
		t.Fatalf("incluster exited %d: %s", status.ExitCode, status.Message)
	}
	var rep inClusterReport
	if err := json.Unmarshal([]byte(status.Message), &rep); err != nil || len(rep.Results) != 2 {
		t.Fatalf("report %q: %v", status.Message, err)
	}
	t.Logf("report: %s", status.Message)
	if rep.Host != "https://10.97.0.1:443" {
		t.Errorf("host %q; want the kubernetes Service's ClusterIP", rep.Host)
	}
	pods, secrets := rep.Results[0], rep.Results[1]
	if pods.Code != http.StatusOK || !slices.Contains(pods.Names, "incluster") {
		t.Errorf("list pods: %+v; want 200 naming the pod itself", pods)
	}
	if secrets.Code != http.StatusForbidden || secrets.Reason != string(metav1.StatusReasonForbidden) {
		t.Errorf("list secrets: %+v; want 403 Forbidden", secrets)
	}
}

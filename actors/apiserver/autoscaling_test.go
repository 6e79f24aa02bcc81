package apiserver_test

import (
	"encoding/json"
	"strings"
	"testing"
)

const hpaPath = "/apis/autoscaling/v2/namespaces/default/horizontalpodautoscalers"

func TestHorizontalPodAutoscalerValidationAndDefaults(t *testing.T) {
	a, _ := newAPI(t)
	code, out := a.do("POST", hpaPath, "application/json", `{"apiVersion":"autoscaling/v2","kind":"HorizontalPodAutoscaler",
		"metadata":{"name":"bad"},"spec":{"scaleTargetRef":{"apiVersion":"apps/v1","kind":"Deployment"},"minReplicas":0,"maxReplicas":0,
		"metrics":[{"type":"Pods","pods":{"metric":{"name":"qps"},"target":{"type":"AverageValue","averageValue":"1"}}},
		           {"type":"Resource","resource":{"name":"cpu","target":{"type":"Utilization"}}}],
		"behavior":{"scaleDown":{"stabilizationWindowSeconds":4000,"policies":[{"type":"Pods","value":1,"periodSeconds":2000}]}}}}`)
	msg, _ := out["message"].(string)
	if code != 422 {
		t.Fatalf("invalid HPA: %d %v", code, out)
	}
	for _, field := range []string{"spec.minReplicas", "spec.maxReplicas", "spec.scaleTargetRef.name", "spec.metrics[0].type",
		"custom and external metrics are not served", "spec.metrics[1].resource.target.averageUtilization",
		"spec.behavior.scaleDown.stabilizationWindowSeconds", "spec.behavior.scaleDown.policies[0].periodSeconds"} {
		if !strings.Contains(msg, field) {
			t.Errorf("422 does not name %s: %s", field, msg)
		}
	}
	if code, _ := a.do("GET", hpaPath+"/bad", "", ""); code != 404 {
		t.Fatalf("an invalid HPA was stored: %d", code)
	}

	// Defaults: minReplicas 1, 80% CPU without metrics, each direction's rules filled in.
	obj := a.mustDo(201, "POST", hpaPath, "application/json", `{"apiVersion":"autoscaling/v2","kind":"HorizontalPodAutoscaler",
		"metadata":{"name":"web"},"spec":{"scaleTargetRef":{"apiVersion":"apps/v1","kind":"Deployment","name":"web"},"maxReplicas":5,
		"behavior":{"scaleDown":{"stabilizationWindowSeconds":5}}}}`)
	var spec struct {
		MinReplicas int32 `json:"minReplicas"`
		Metrics     []struct {
			Resource struct {
				Name   string `json:"name"`
				Target struct {
					AverageUtilization int32 `json:"averageUtilization"`
				} `json:"target"`
			} `json:"resource"`
		} `json:"metrics"`
		Behavior struct {
			ScaleUp, ScaleDown struct {
				StabilizationWindowSeconds int32  `json:"stabilizationWindowSeconds"`
				SelectPolicy               string `json:"selectPolicy"`
				Policies                   []any  `json:"policies"`
			}
		} `json:"behavior"`
	}
	b, _ := json.Marshal(obj["spec"])
	if err := json.Unmarshal(b, &spec); err != nil {
		t.Fatal(err)
	}
	up, down := spec.Behavior.ScaleUp, spec.Behavior.ScaleDown
	if spec.MinReplicas != 1 || len(spec.Metrics) != 1 || spec.Metrics[0].Resource.Name != "cpu" || spec.Metrics[0].Resource.Target.AverageUtilization != 80 ||
		up.StabilizationWindowSeconds != 0 || up.SelectPolicy != "Max" || len(up.Policies) != 2 ||
		down.StabilizationWindowSeconds != 5 || down.SelectPolicy != "Max" || len(down.Policies) != 1 {
		t.Fatalf("defaults: %s", b)
	}
}

// kubectl autoscale creates an autoscaling/v2 HPA (its first choice) that kubectl get and
// describe show; with no controller running here, the targets read <unknown>.
func TestKubectlAutoscale(t *testing.T) {
	_, cp := newAPI(t)
	kubectl := kubectlEnv(t, cp.URL())
	if out, err := kubectl("create", "deployment", "web", "--image=img:1"); err != nil {
		t.Fatalf("create deployment: %v\n%s", err, out)
	}
	out, err := kubectl("autoscale", "deployment", "web", "--cpu-percent=50", "--min=2", "--max=5")
	if err != nil || !strings.Contains(out, "horizontalpodautoscaler.autoscaling/web autoscaled") {
		t.Fatalf("autoscale: %v\n%s", err, out)
	}
	out, err = kubectl("get", "hpa")
	if err != nil || !strings.Contains(out, "REFERENCE") || !strings.Contains(out, "Deployment/web") || !strings.Contains(out, "cpu: <unknown>/50%") ||
		!strings.Contains(out, "MINPODS") || !strings.Contains(out, " 2 ") || !strings.Contains(out, " 5 ") {
		t.Fatalf("get hpa: %v\n%s", err, out)
	}
	out, err = kubectl("describe", "hpa", "web")
	if err != nil || !strings.Contains(out, "Reference:") || !strings.Contains(out, "Deployment/web") || !strings.Contains(out, "Max replicas:") {
		t.Fatalf("describe hpa: %v\n%s", err, out)
	}
}

// Command incluster is Skiff's in-cluster client test workload: with client-go's
// rest.InClusterConfig, unchanged, it lists the pods of its own namespace and then its Secrets,
// which a Role granting pods alone does not allow, and reports both as one JSON line on stdout
// and in the termination message, so a test reads the outcome from the pod's status.
package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"log"
	"net/http"
	"os"
	"strings"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
)

// namespaceFile is where the kube-api-access volume puts the pod's namespace.
const namespaceFile = "/var/run/secrets/kubernetes.io/serviceaccount/namespace"

// Result is one API call and how the apiserver answered it.
type Result struct {
	Call   string   `json:"call"`
	Code   int32    `json:"code"`             // HTTP status; 0 when no answer came
	Reason string   `json:"reason,omitempty"` // metav1.StatusReason of a refusal
	Names  []string `json:"names,omitempty"`  // what a list returned
	Error  string   `json:"error,omitempty"`
}

// Report is what the program prints.
type Report struct {
	Host      string   `json:"host"`
	Namespace string   `json:"namespace"`
	Results   []Result `json:"results"`
}

func main() {
	wait := flag.Duration("wait", time.Minute, "keep retrying calls that get no answer from the API for this long")
	out := flag.String("termination-log", "/dev/termination-log", "also write the report here (\"\" = stdout only)")
	flag.Parse()
	rep, err := run(*wait)
	if err != nil {
		log.Fatal(err)
	}
	b, _ := json.Marshal(rep)
	fmt.Println(string(b))
	if *out != "" {
		if err := os.WriteFile(*out, b, 0o644); err != nil {
			log.Fatal(err)
		}
	}
}

func run(wait time.Duration) (*Report, error) {
	cfg, err := rest.InClusterConfig()
	if err != nil {
		return nil, err
	}
	ns, err := os.ReadFile(namespaceFile)
	if err != nil {
		return nil, err
	}
	cs, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return nil, err
	}
	rep := &Report{Host: cfg.Host, Namespace: strings.TrimSpace(string(ns))}
	ctx, cancel := context.WithTimeout(context.Background(), wait)
	defer cancel()
	calls := []struct {
		name string
		list func(context.Context) ([]string, error)
	}{
		{"list pods", func(ctx context.Context) ([]string, error) {
			return names(cs.CoreV1().Pods(rep.Namespace).List(ctx, metav1.ListOptions{}))
		}},
		{"list secrets", func(ctx context.Context) ([]string, error) {
			return names(cs.CoreV1().Secrets(rep.Namespace).List(ctx, metav1.ListOptions{}))
		}},
	}
	for _, c := range calls {
		rep.Results = append(rep.Results, call(ctx, c.name, c.list))
	}
	return rep, nil
}

// names are the names of a list's items.
func names(list runtime.Object, err error) ([]string, error) {
	if err != nil {
		return nil, err
	}
	items, err := meta.ExtractList(list)
	if err != nil {
		return nil, err
	}
	out := make([]string, 0, len(items))
	for _, o := range items {
		a, err := meta.Accessor(o)
		if err != nil {
			return nil, err
		}
		out = append(out, a.GetName())
	}
	return out, nil
}

// call runs list until the API answers (the Service may route only once the node has seen the
// pod) or ctx ends, and records the answer.
func call(ctx context.Context, name string, list func(context.Context) ([]string, error)) Result {
	for {
		names, err := list(ctx)
		if err == nil {
			return Result{Call: name, Code: http.StatusOK, Names: names}
		}
		var status apierrors.APIStatus
		if errors.As(err, &status) && status.Status().Code != 0 {
			return Result{Call: name, Code: status.Status().Code, Reason: string(status.Status().Reason), Error: err.Error()}
		}
		select {
		case <-ctx.Done():
			return Result{Call: name, Error: err.Error()}
		case <-time.After(time.Second):
		}
	}
}

// Package nodeapi is the small request/reply API each node agent serves over NATS for what only
// the node can answer: container logs, exec, resource usage, and the opening of interactive
// sessions (exec, attach, port-forward) whose bytes then flow as package stream's frames. The
// apiserver's pods/log, pods/exec, pods/attach and pods/portforward subresources and its
// metrics.k8s.io API are its callers, so clients meet it through the Kubernetes API.
package nodeapi

import (
	"context"
	"encoding/json"
	"time"

	"github.com/nats-io/nats.go"
	corev1 "k8s.io/api/core/v1"

	"github.com/skiff-sh/skiff/bus/identity"
	"github.com/skiff-sh/skiff/bus/rpc"
)

// ExecSubject is where node `node` answers exec without a stream.
// The subjects live in bus/identity, whose NATS permissions let only that node serve them.
func ExecSubject(node string) string { return identity.NodeSubject(node, "exec") }

// OpenSubject is where node `node` opens sessions; session id's frames travel on
// ToNodeSubject and FromNodeSubject, under the node's own subjects so NATS permissions keep
// every other node out.
func OpenSubject(node string) string { return identity.NodeSubject(node, "open") }
func ToNodeSubject(node, id string) string {
	return identity.NodeSubject(node, identity.SessionToNode+"."+id)
}
func FromNodeSubject(node, id string) string {
	return identity.NodeSubject(node, identity.SessionFromNode+"."+id)
}

// Session kinds.
const (
	SessionExec        = "exec"
	SessionAttach      = "attach"
	SessionPortForward = "portforward"
	SessionLog         = "log"
)

// OpenRequest starts session ID on the node: a command in a container (exec), the container's
// output (attach), its log as pods/log reads it (log: on channel 1, stdout and stderr in the
// order written) or a TCP connection to a port in the pod (portforward). The node subscribes
// to ToNodeSubject before it answers, so the caller may send at once.
type OpenRequest struct {
	ID        string   `json:"id"`
	Kind      string   `json:"kind"`
	PodUID    string   `json:"podUID"`
	Container string   `json:"container,omitempty"`
	Command   []string `json:"command,omitempty"`
	Stdin     bool     `json:"stdin,omitempty"`
	TTY       bool     `json:"tty,omitempty"`
	Port      int32    `json:"port,omitempty"`
	// Log are a log session's options, as the apiserver decoded and validated them; the node
	// reads sinceSeconds against its own clock, as the kubelet does.
	Log *corev1.PodLogOptions `json:"log,omitempty"`
}

// OpenReply is empty: an error comes back as the call's error.
type OpenReply struct{}

// ExecRequest runs a command in a container, without a terminal.
type ExecRequest struct {
	PodUID    string   `json:"podUID"`
	Container string   `json:"container"`
	Command   []string `json:"command"`
	Stdin     []byte   `json:"stdin,omitempty"`
}

// ExecReply is the command's output and exit code.
type ExecReply struct {
	Stdout   []byte `json:"stdout,omitempty"`
	Stderr   []byte `json:"stderr,omitempty"`
	ExitCode int    `json:"exitCode"`
}

// Call sends req to subject and decodes the reply into out.
func Call(ctx context.Context, nc *nats.Conn, subject string, req, out any) error {
	data, err := json.Marshal(req)
	if err != nil {
		return err
	}
	reply, _, err := rpc.Call(ctx, nc, subject, data, nil)
	if err != nil {
		return err
	}
	return json.Unmarshal(reply, out)
}

// Handle adapts a typed handler to rpc.Serve.
func Handle[Req, Rep any](f func(context.Context, Req) (Rep, error)) rpc.Handler {
	return func(ctx context.Context, _ string, data []byte, _ nats.Header) ([]byte, nats.Header, error) {
		var req Req
		if err := json.Unmarshal(data, &req); err != nil {
			return nil, nil, err
		}
		rep, err := f(ctx, req)
		if err != nil {
			return nil, nil, err
		}
		out, err := json.Marshal(rep)
		return out, nil, err
	}
}

// MetricsSubject is where node `node` answers its latest resource usage sample.
func MetricsSubject(node string) string { return identity.NodeSubject(node, "metrics") }

// MetricsRequest asks for the node's latest usage and its running containers'.
type MetricsRequest struct{}

// Usage is CPU and memory over one sampling window, as the metrics API reports it: CPU is the
// average rate over [Timestamp-Window, Timestamp], memory the working set at Timestamp.
type Usage struct {
	Timestamp    time.Time     `json:"timestamp"`
	Window       time.Duration `json:"window"`
	CPUNanoCores uint64        `json:"cpuNanoCores"`
	MemoryBytes  uint64        `json:"memoryBytes"`
}

// ContainerUsage is one running container's Usage.
type ContainerUsage struct {
	PodUID string `json:"podUID"`
	Name   string `json:"name"`
	Usage
}

// MetricsReply is the node's usage (nil before it has two samples) and its containers'.
type MetricsReply struct {
	Node       *Usage           `json:"node,omitempty"`
	Containers []ContainerUsage `json:"containers,omitempty"`
}

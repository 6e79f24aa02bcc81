package agent

import (
	"bytes"
	"context"
	"fmt"

	"github.com/nats-io/nats.go"

	kruntime "github.com/skiff-sh/skiff/actors/kubelet/runtime"
	"github.com/skiff-sh/skiff/actors/kubelet/stats"
	"github.com/skiff-sh/skiff/actors/nodeapi"
	"github.com/skiff-sh/skiff/bus/rpc"
)

// serveNodeAPI answers exec, sessions (logs among them) and resource usage for this node's
// containers.
func serveNodeAPI(nc *nats.Conn, node string, rt *kruntime.Runtime, sampler *stats.Sampler) ([]*nats.Subscription, error) {
	exec, err := rpc.Serve(nc, nodeapi.ExecSubject(node), "", nodeapi.Handle(func(ctx context.Context, r nodeapi.ExecRequest) (nodeapi.ExecReply, error) {
		c, err := findContainer(ctx, rt, r.PodUID, r.Container)
		if err != nil {
			return nodeapi.ExecReply{}, err
		}
		var stdout, stderr bytes.Buffer
		code, err := rt.Exec(ctx, c.ID, r.Command, bytes.NewReader(r.Stdin), &stdout, &stderr, false)
		return nodeapi.ExecReply{Stdout: stdout.Bytes(), Stderr: stderr.Bytes(), ExitCode: code}, err
	}))
	if err != nil {
		return nil, err
	}
	open, err := serveSessions(nc, node, rt)
	if err != nil {
		_ = exec.Unsubscribe()
		return nil, err
	}
	metrics, err := rpc.Serve(nc, nodeapi.MetricsSubject(node), "", nodeapi.Handle(func(context.Context, nodeapi.MetricsRequest) (nodeapi.MetricsReply, error) {
		return sampler.Latest(), nil
	}))
	if err != nil {
		_ = exec.Unsubscribe()
		_ = open.Unsubscribe()
		return nil, err
	}
	return []*nats.Subscription{exec, open, metrics}, nil
}

// findContainer is the newest attempt of a pod's container.
func findContainer(ctx context.Context, rt *kruntime.Runtime, podUID, name string) (kruntime.ContainerStatus, error) {
	pods, err := rt.List(ctx)
	if err != nil {
		return kruntime.ContainerStatus{}, err
	}
	var found *kruntime.ContainerStatus
	for _, p := range pods {
		if p.PodUID != podUID {
			continue
		}
		for i, c := range p.Containers {
			if (name == "" || c.Name == name) && (found == nil || c.Attempt > found.Attempt) {
				found = &p.Containers[i]
			}
		}
	}
	if found == nil {
		return kruntime.ContainerStatus{}, fmt.Errorf("container %q of pod %s is not on this node", name, podUID)
	}
	return *found, nil
}

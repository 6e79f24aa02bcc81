package agent

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"os"

	"github.com/nats-io/nats.go"

	kruntime "github.com/skiff-sh/skiff/actors/kubelet/runtime"
	"github.com/skiff-sh/skiff/actors/kubelet/stats"
	"github.com/skiff-sh/skiff/actors/nodeapi"
	"github.com/skiff-sh/skiff/bus/rpc"
)

// maxLogChunk bounds one log reply well under the NATS payload limit.
const maxLogChunk = 1 << 20

// serveNodeAPI answers logs, exec, interactive sessions and resource usage for this node's containers.
func serveNodeAPI(nc *nats.Conn, node string, rt *kruntime.Runtime, sampler *stats.Sampler) ([]*nats.Subscription, error) {
	logs, err := rpc.Serve(nc, nodeapi.LogSubject(node), "", nodeapi.Handle(func(ctx context.Context, r nodeapi.LogRequest) (nodeapi.LogReply, error) {
		return readLog(ctx, rt, r)
	}))
	if err != nil {
		return nil, err
	}
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
		_ = logs.Unsubscribe()
		return nil, err
	}
	open, err := serveSessions(nc, node, rt)
	if err != nil {
		_ = logs.Unsubscribe()
		_ = exec.Unsubscribe()
		return nil, err
	}
	metrics, err := rpc.Serve(nc, nodeapi.MetricsSubject(node), "", nodeapi.Handle(func(context.Context, nodeapi.MetricsRequest) (nodeapi.MetricsReply, error) {
		return sampler.Latest(), nil
	}))
	if err != nil {
		_ = logs.Unsubscribe()
		_ = exec.Unsubscribe()
		_ = open.Unsubscribe()
		return nil, err
	}
	return []*nats.Subscription{logs, exec, open, metrics}, nil
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

func readLog(ctx context.Context, rt *kruntime.Runtime, r nodeapi.LogRequest) (nodeapi.LogReply, error) {
	c, err := findContainer(ctx, rt, r.PodUID, r.Container)
	if err != nil {
		return nodeapi.LogReply{}, err
	}
	path, running := c.LogPath, c.State == kruntime.StateRunning
	if r.Previous {
		if c.Attempt == 0 {
			return nodeapi.LogReply{}, fmt.Errorf("previous terminated container %q not found", c.Name)
		}
		path, running = rt.LogPath(r.PodUID, c.Name, c.Attempt-1), false
	}
	f, err := os.Open(path)
	if err != nil {
		return nodeapi.LogReply{}, err
	}
	defer f.Close()
	limit := int64(maxLogChunk)
	if r.MaxBytes > 0 && r.MaxBytes < limit {
		limit = r.MaxBytes
	}
	start, tail := r.Offset, r.Offset == 0 && r.TailLines > 0
	if tail {
		// The last lines are in the last chunk, not the first: read back from the end.
		st, err := f.Stat()
		if err != nil {
			return nodeapi.LogReply{}, err
		}
		start = max(0, st.Size()-maxLogChunk)
		limit = maxLogChunk
	}
	if _, err := f.Seek(start, io.SeekStart); err != nil {
		return nodeapi.LogReply{}, err
	}
	data, err := io.ReadAll(io.LimitReader(f, limit))
	if err != nil {
		return nodeapi.LogReply{}, err
	}
	next := start + int64(len(data))
	if tail {
		data = lastLines(data, r.TailLines)
	}
	return nodeapi.LogReply{Data: data, NextOffset: next, Running: running}, nil
}

func lastLines(data []byte, n int64) []byte {
	trimmed := bytes.TrimSuffix(data, []byte("\n"))
	for i := len(trimmed) - 1; i >= 0; i-- {
		if trimmed[i] == '\n' {
			n--
			if n == 0 {
				return data[i+1:]
			}
		}
	}
	return data
}

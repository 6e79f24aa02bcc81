package agent

import (
	"context"
	"fmt"
	"io"
	"time"

	kruntime "github.com/skiff-sh/skiff/actors/kubelet/runtime"
	"github.com/skiff-sh/skiff/actors/kubelet/runtime/crilog"
	"github.com/skiff-sh/skiff/actors/nodeapi"
	"github.com/skiff-sh/skiff/actors/nodeapi/stream"
)

// prepareLog checks a log session (the attempt's file is there and can serve the options)
// before the open call answers, so its faults reach the client as the request's error.
func prepareLog(rt *kruntime.Runtime, c kruntime.ContainerStatus, r nodeapi.OpenRequest) (func(*stream.Session) stream.ExitStatus, error) {
	if r.Log == nil {
		return nil, fmt.Errorf("a log session needs its options")
	}
	path, running := c.LogPath, containerRunning(rt, c.ID)
	if r.Log.Previous {
		if c.Attempt == 0 {
			return nil, fmt.Errorf("previous terminated container %q in pod %s not found", c.Name, r.PodUID)
		}
		path, running = rt.LogPath(r.PodUID, c.Name, c.Attempt-1), exited
	}
	log, err := crilog.Open(path, crilog.NewOptions(r.Log, time.Now()))
	if err != nil {
		return nil, fmt.Errorf("log of container %q: %w", c.Name, err)
	}
	return func(s *stream.Session) stream.ExitStatus {
		out := s.Writer(1) // one channel: stdout and stderr stay in the order written
		return copyLog(s, log, running, out, out)
	}, nil
}

// copyLog copies the log to the session until it is read (or, following, until the container
// stops) or the session ends.
func copyLog(s *stream.Session, log *crilog.Log, running crilog.Running, stdout, stderr io.Writer) stream.ExitStatus {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go func() {
		select {
		case <-s.Done():
			cancel() // the client left
		case <-ctx.Done():
		}
	}()
	if err := log.Copy(ctx, running, stdout, stderr); err != nil {
		if ctx.Err() != nil {
			return stream.ExitStatus{}
		}
		return failed(err)
	}
	_ = s.CloseChannel(1)
	_ = s.CloseChannel(2)
	return stream.ExitStatus{}
}

// containerRunning asks containerd whether container id still runs; a restart is a new
// container with a new log, so a follow ends with the attempt it started on.
func containerRunning(rt *kruntime.Runtime, id string) crilog.Running {
	return func(ctx context.Context) (bool, error) { return rt.IsRunning(ctx, id), nil }
}

func exited(context.Context) (bool, error) { return false, nil }

package runtime

import (
	"context"
	"io"
	"os"
	"sync"
	"syscall"
	"time"

	"github.com/skiff-sh/skiff/actors/kubelet/runtime/crilog"
)

// The runtime copies each container's output FIFOs (stdio.go) into its CRI log, as
// containerd's CRI plugin does, and resumes the copies when a new agent starts.

// logCopy is the running copy of one container's output into its log.
type logCopy struct {
	outputs []output
	done    chan struct{}
}

// copyLog appends a container's output to its log, both streams through one crilog.File so
// their lines interleave whole, until the shim closes the FIFOs (the process exited; they are
// removed then), or until the runtime closes, leaving the FIFOs for the next one to resume.
func (r *Runtime) copyLog(id, logPath string, outputs []output) {
	c := &logCopy{outputs: outputs, done: make(chan struct{})}
	r.logMu.Lock()
	if r.logCopies == nil {
		r.logCopies = map[string]*logCopy{}
	}
	r.logCopies[id] = c
	r.logMu.Unlock()
	go func() {
		defer func() {
			r.logMu.Lock()
			if r.logCopies[id] == c {
				delete(r.logCopies, id)
			}
			r.logMu.Unlock()
			close(c.done)
		}()
		var dst io.Writer = io.Discard // never block the container on a log that cannot open
		if f, err := os.OpenFile(logPath, os.O_APPEND|os.O_CREATE|os.O_WRONLY, 0o644); err == nil {
			defer f.Close()
			dst = f
		}
		// crilog.File drops what it cannot write (a full disk), so the copy never stalls.
		file := crilog.NewFile(dst, time.Now)
		var wg sync.WaitGroup
		for _, o := range outputs {
			wg.Go(func() {
				copyOut := file.Copy
				if o.terminal {
					copyOut = file.CopyAsRead
				}
				err := copyOut(o.stream, o.r)
				_ = o.r.Close()
				if err == nil {
					_ = os.Remove(o.path)
				}
			})
		}
		wg.Wait()
	}()
}

// logDrainTimeout bounds the wait for a copy whose FIFO something other than the shim still
// holds open (a leaked descendant of the container), so deletion never hangs on it.
const logDrainTimeout = 10 * time.Second

// drainLog waits for container id's copy to reach the end of its output, which the shim
// closes as the task goes: what the process wrote reaches the log before the task is gone.
func (r *Runtime) drainLog(ctx context.Context, id string) {
	r.logMu.Lock()
	c := r.logCopies[id]
	r.logMu.Unlock()
	if c == nil {
		return
	}
	select {
	case <-c.done:
	case <-ctx.Done():
	case <-time.After(logDrainTimeout):
	}
}

// stopLogs ends this runtime's copies; the output waits in the FIFOs, which the shims hold.
func (r *Runtime) stopLogs() {
	r.logMu.Lock()
	copies := make([]*logCopy, 0, len(r.logCopies))
	for _, c := range r.logCopies {
		copies = append(copies, c)
	}
	r.logMu.Unlock()
	for _, c := range copies {
		for _, o := range c.outputs {
			_ = o.r.Close()
		}
		<-c.done
	}
}

// resumeLogs restarts the copy of each of this runtime's containers' output, which ended with
// the agent that ran it. The shim holds a running process's FIFOs, so what it wrote meanwhile is
// copied. The shim closes them when the process exits, and a pipe that no one holds loses its
// contents: output a container wrote before exiting while no runtime copied is lost, as with
// containerd's CRI plugin.
func (r *Runtime) resumeLogs(ctx context.Context) error {
	ctx = r.ctx(ctx)
	all, err := r.client.Containers(ctx, `labels."`+labelRole+`"==`+roleContainer)
	if err != nil {
		return err
	}
	for _, c := range all {
		info, err := c.Info(ctx)
		if err != nil {
			continue
		}
		var outputs []output
		for _, stream := range outputStreams(info.Labels[labelTTY] == "true") {
			path := r.fifoPath(info.Labels[labelPodUID], c.ID(), stream)
			// Non-blocking, unlike the FIFO library's open, which would wait for a writer that
			// has gone: with no shim holding the FIFO the copy reads its end at once.
			out, err := os.OpenFile(path, os.O_RDONLY|syscall.O_NONBLOCK, 0)
			if err != nil {
				continue // copied to its end already
			}
			outputs = append(outputs, output{stream: stream, path: path, r: out, terminal: info.Labels[labelTTY] == "true"})
		}
		if len(outputs) > 0 {
			r.copyLog(c.ID(), info.Labels[labelLogPath], outputs)
		}
	}
	return nil
}

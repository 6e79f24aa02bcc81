package runtime

import (
	"context"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sync"
	"syscall"
	"time"

	"github.com/containerd/containerd/v2/pkg/cio"
	"github.com/containerd/fifo"
	"golang.org/x/sys/unix"

	"github.com/skiff-sh/skiff/actors/kubelet/runtime/crilog"
)

// A container's init process is wired as containerd's CRI plugin wires it: its stdout and
// stderr (a terminal: its one output) go to FIFOs that this runtime copies into the log file in
// the CRI format, so no process per container does it. The shim holds each FIFO open both ways
// while the process runs, so output waits in it while the agent restarts and the next runtime
// resumes the copy (New). With stdin it reads a FIFO whose write end this runtime holds open
// (closing it is the process's EOF).

// pipeSize is what an output FIFO buffers while no runtime copies it (an agent restart), so
// a chatty container does not block on the default 64 KiB. The kernel takes the pages as
// output arrives, not up front; containerd leaves the default.
const pipeSize = 1 << 20

// output is the read end of one output FIFO of a container.
type output struct {
	stream, path string
	r            io.ReadCloser
}

// stdio are the open ends of one container's FIFOs, until the task starts or fails to.
type stdio struct {
	cfg     cio.Config
	stdin   io.WriteCloser // write end of the stdin FIFO; nil without stdin
	outputs []output
	holds   []int // fds keeping each output pipe, and the size set on it, until the shim opens it
}

// shimIO hands the shim a configuration; the runtime copies nothing through containerd's client.
type shimIO struct{ cfg cio.Config }

func (s shimIO) Config() cio.Config { return s.cfg }
func (shimIO) Cancel()              {}
func (shimIO) Wait()                {}
func (shimIO) Close() error         { return nil }

func (s *stdio) creator() cio.Creator {
	return func(string) (cio.IO, error) { return shimIO{s.cfg}, nil }
}

// release drops the holds once the shim has its ends (or will never open them).
func (s *stdio) release() {
	for _, fd := range s.holds {
		_ = unix.Close(fd)
	}
	s.holds = nil
}

// close releases what the runtime holds when the task did not start.
func (s *stdio) close() {
	s.release()
	if s.stdin != nil {
		_ = s.stdin.Close()
	}
	for _, o := range s.outputs {
		_ = o.r.Close()
	}
}

func (r *Runtime) fifoPath(podUID, id, stream string) string {
	return filepath.Join(r.podDir(podUID), "io", id+"."+stream)
}

// outputStreams are the output FIFOs of a container: a terminal has one stream, whose records
// are stdout's as the CRI writes them.
func outputStreams(tty bool) []string {
	if tty {
		return []string{crilog.Stdout}
	}
	return []string{crilog.Stdout, crilog.Stderr}
}

// openStdio makes the FIFOs container id needs and opens the runtime's ends of them. The
// opens do not wait for the shim: the FIFO library completes them when it opens its side.
func (r *Runtime) openStdio(podUID, id, logPath string, stdin, tty bool) (_ *stdio, err error) {
	s := &stdio{cfg: cio.Config{Terminal: tty}}
	defer func() {
		if err != nil {
			s.close()
		}
	}()
	if err := os.MkdirAll(filepath.Dir(r.fifoPath(podUID, id, "")), 0o700); err != nil {
		return nil, err
	}
	// A FIFO left by an earlier try of this attempt would hand the shim stale ends.
	for _, stream := range []string{"stdin", crilog.Stdout, crilog.Stderr} {
		if err := os.Remove(r.fifoPath(podUID, id, stream)); err != nil && !os.IsNotExist(err) {
			return nil, err
		}
	}
	// The log exists from the start, even for a container that never writes.
	f, err := os.OpenFile(logPath, os.O_APPEND|os.O_CREATE|os.O_WRONLY, 0o644)
	if err != nil {
		return nil, err
	}
	_ = f.Close()
	// The FIFOs live as long as the container, not as long as this call.
	ctx := context.Background()
	if stdin {
		s.cfg.Stdin = r.fifoPath(podUID, id, "stdin")
		if s.stdin, err = fifo.OpenFifo(ctx, s.cfg.Stdin, syscall.O_WRONLY|syscall.O_CREAT|syscall.O_NONBLOCK, 0o600); err != nil {
			return nil, fmt.Errorf("stdin fifo: %w", err)
		}
	}
	for _, stream := range outputStreams(tty) {
		path := r.fifoPath(podUID, id, stream)
		out, err := fifo.OpenFifo(ctx, path, syscall.O_RDONLY|syscall.O_CREAT|syscall.O_NONBLOCK, 0o600)
		if err != nil {
			return nil, fmt.Errorf("%s fifo: %w", stream, err)
		}
		s.outputs = append(s.outputs, output{stream: stream, path: path, r: out})
		// The FIFO library opens its end only when the shim opens the other, and a pipe's size
		// lasts only while an end is open: hold one from here.
		fd, err := unix.Open(path, unix.O_RDONLY|unix.O_NONBLOCK|unix.O_CLOEXEC, 0)
		if err != nil {
			return nil, fmt.Errorf("%s fifo: %w", stream, err)
		}
		s.holds = append(s.holds, fd)
		_, _ = unix.FcntlInt(uintptr(fd), unix.F_SETPIPE_SZ, pipeSize) // best effort: the default still works
	}
	s.cfg.Stdout = s.outputs[0].path
	if !tty {
		s.cfg.Stderr = s.outputs[1].path
	}
	return s, nil
}

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
				err := file.Copy(o.stream, o.r)
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
			outputs = append(outputs, output{stream: stream, path: path, r: out})
		}
		if len(outputs) > 0 {
			r.copyLog(c.ID(), info.Labels[labelLogPath], outputs)
		}
	}
	return nil
}

// stdinPipe is the write end of one container's stdin, shared by its attached clients.
type stdinPipe struct {
	mu   sync.Mutex
	w    io.WriteCloser // nil once closed
	path string
	once bool // stdinOnce: closed when the first attached client leaves
	tty  bool
}

func (p *stdinPipe) write(b []byte) (int, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.w == nil {
		return 0, io.ErrClosedPipe
	}
	return p.w.Write(b)
}

func (p *stdinPipe) close() {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.w != nil {
		_ = p.w.Close()
		_ = os.Remove(p.path)
		p.w = nil
	}
}

// keepStdin registers a started container's stdin for attach.
func (r *Runtime) keepStdin(id string, p *stdinPipe) {
	r.stdinMu.Lock()
	defer r.stdinMu.Unlock()
	if r.stdins == nil {
		r.stdins = map[string]*stdinPipe{}
	}
	r.stdins[id] = p
}

// dropStdin closes container id's stdin as its task goes.
func (r *Runtime) dropStdin(id string) {
	r.stdinMu.Lock()
	p := r.stdins[id]
	delete(r.stdins, id)
	r.stdinMu.Unlock()
	if p != nil {
		p.close()
	}
}

package runtime

import (
	"context"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sync"
	"syscall"

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
	terminal     bool // a terminal's: copied as read, so a prompt reaches attached clients
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
		s.outputs = append(s.outputs, output{stream: stream, path: path, r: out, terminal: tty})
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

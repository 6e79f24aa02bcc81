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

	"github.com/skiff-sh/skiff/actors/kubelet/runtime/crilog"
)

// A container's init process is wired as the CRI wires it: its output goes to the log file
// in the CRI format, through the logger the shim starts, so logging outlives an agent restart; with stdin it reads a FIFO whose
// write end this runtime holds open (closing it is the process's EOF); with a terminal the
// shim's console copier writes only to a FIFO, so the runtime copies that FIFO to the log (the
// shim keeps the FIFO open both ways, so output waits in it while the agent restarts).

// stdio are the open ends of one container's FIFOs, until the task starts or fails to.
type stdio struct {
	cfg    cio.Config
	stdin  io.WriteCloser // write end of the stdin FIFO; nil without stdin
	output io.ReadCloser  // read end of the terminal's output FIFO; nil without a terminal
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

// close releases what the runtime holds when the task did not start.
func (s *stdio) close() {
	if s.stdin != nil {
		_ = s.stdin.Close()
	}
	if s.output != nil {
		_ = s.output.Close()
	}
}

func (r *Runtime) fifoPath(podUID, id, stream string) string {
	return filepath.Join(r.podDir(podUID), "io", id+"."+stream)
}

// openStdio makes the FIFOs container id needs and opens the runtime's ends of them. The
// opens do not wait for the shim: the FIFO library completes them when it opens its side.
func (r *Runtime) openStdio(podUID, id, logPath string, stdin, tty bool) (*stdio, error) {
	logURI, err := criLogger(logPath)
	if err != nil {
		return nil, err
	}
	s := &stdio{cfg: cio.Config{Stdout: logURI, Stderr: logURI, Terminal: tty}}
	if !stdin && !tty {
		return s, nil
	}
	if err := os.MkdirAll(filepath.Dir(r.fifoPath(podUID, id, "")), 0o700); err != nil {
		return nil, err
	}
	// A FIFO left by an earlier try of this attempt would hand the shim stale ends.
	for _, stream := range []string{"stdin", "stdout"} {
		if err := os.Remove(r.fifoPath(podUID, id, stream)); err != nil && !os.IsNotExist(err) {
			return nil, err
		}
	}
	// The FIFOs live as long as the container, not as long as this call.
	ctx := context.Background()
	if stdin {
		s.cfg.Stdin = r.fifoPath(podUID, id, "stdin")
		if s.stdin, err = fifo.OpenFifo(ctx, s.cfg.Stdin, syscall.O_WRONLY|syscall.O_CREAT|syscall.O_NONBLOCK, 0o600); err != nil {
			return nil, fmt.Errorf("stdin fifo: %w", err)
		}
	}
	if tty {
		// The log exists from the start, as the shim's own file output makes it.
		f, err := os.OpenFile(logPath, os.O_APPEND|os.O_CREATE|os.O_WRONLY, 0o644)
		if err != nil {
			s.close()
			return nil, err
		}
		_ = f.Close()
		s.cfg.Stdout, s.cfg.Stderr = r.fifoPath(podUID, id, "stdout"), ""
		if s.output, err = fifo.OpenFifo(ctx, s.cfg.Stdout, syscall.O_RDONLY|syscall.O_CREAT|syscall.O_NONBLOCK, 0o600); err != nil {
			s.close()
			return nil, fmt.Errorf("terminal fifo: %w", err)
		}
	}
	return s, nil
}

// copyTerminalLog appends a terminal's output to the log until the shim closes its FIFO (the
// process exited), then removes the FIFO; or until the runtime closes, leaving the FIFO for
// the next one to resume.
func (r *Runtime) copyTerminalLog(id string, output io.ReadCloser, fifoPath, logPath string) {
	r.termMu.Lock()
	if r.terminals == nil {
		r.terminals = map[string]io.Closer{}
	}
	r.terminals[id] = output
	r.termMu.Unlock()
	defer func() {
		r.termMu.Lock()
		delete(r.terminals, id)
		r.termMu.Unlock()
		_ = output.Close()
	}()
	f, err := os.OpenFile(logPath, os.O_APPEND|os.O_CREATE|os.O_WRONLY, 0o644)
	if err != nil {
		_, _ = io.Copy(io.Discard, output) // never block the terminal on a log that cannot open
		return
	}
	defer f.Close()
	// A terminal has one stream: its records are stdout's, as the CRI writes them.
	if err := crilog.NewFile(f, time.Now).Copy(crilog.Stdout, output); err == nil {
		_ = os.Remove(fifoPath)
	}
}

// stopTerminalLogs ends this runtime's copies; the output waits in the FIFOs.
func (r *Runtime) stopTerminalLogs() {
	r.termMu.Lock()
	defer r.termMu.Unlock()
	for _, c := range r.terminals {
		_ = c.Close()
	}
}

// resumeTerminalLogs restarts the copy of each running terminal container's output, which
// ended with the agent that ran it.
func (r *Runtime) resumeTerminalLogs(ctx context.Context) error {
	ctx = r.ctx(ctx)
	all, err := r.client.Containers(ctx, `labels."`+labelTTY+`"==true`)
	if err != nil {
		return err
	}
	for _, c := range all {
		info, err := c.Info(ctx)
		if err != nil {
			continue
		}
		path := r.fifoPath(info.Labels[labelPodUID], c.ID(), "stdout")
		if _, err := os.Stat(path); err != nil || !r.IsRunning(ctx, c.ID()) {
			continue
		}
		out, err := fifo.OpenFifo(context.Background(), path, syscall.O_RDONLY|syscall.O_NONBLOCK, 0)
		if err != nil {
			continue
		}
		go r.copyTerminalLog(c.ID(), out, path, info.Labels[labelLogPath])
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

package runtime

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"syscall"
	"time"

	containerd "github.com/containerd/containerd/v2/client"
	"github.com/containerd/containerd/v2/pkg/cio"
	specs "github.com/opencontainers/runtime-spec/specs-go"
)

// firstSizeWait bounds the wait for a terminal's first size.
const firstSizeWait = time.Second

// Exec runs cmd in a running container (its namespaces, cgroup, env and
// working dir) and returns its exit code. stdin is read to EOF and then
// closed for the process; nil streams are discarded. A cancelled ctx kills
// the process.
func (r *Runtime) Exec(ctx context.Context, id string, cmd []string, stdin io.Reader, stdout, stderr io.Writer, tty bool) (int, error) {
	return r.ExecInteractive(ctx, id, cmd, ExecIO{Stdin: stdin, Stdout: stdout, Stderr: stderr, TTY: tty})
}

// TerminalSize is a terminal's width and height in characters.
type TerminalSize struct{ Width, Height uint16 }

// ExecIO are an exec's streams. With TTY the process gets a terminal whose output all goes to
// Stdout, sized by each value of Resize as it arrives.
type ExecIO struct {
	Stdin          io.Reader
	Stdout, Stderr io.Writer
	TTY            bool
	Resize         <-chan TerminalSize
}

// ExecInteractive is Exec with a terminal that can be resized.
func (r *Runtime) ExecInteractive(ctx context.Context, id string, cmd []string, sio ExecIO) (int, error) {
	stdin, stdout, stderr, tty := sio.Stdin, sio.Stdout, sio.Stderr, sio.TTY
	if len(cmd) == 0 {
		return -1, errors.New("runtime: exec needs a command")
	}
	ctx = r.ctx(ctx)
	c, err := r.client.LoadContainer(ctx, id)
	if err != nil {
		return -1, err
	}
	task, err := c.Task(ctx, nil)
	if err != nil {
		return -1, fmt.Errorf("container %s is not running: %w", id, err)
	}
	spec, err := c.Spec(ctx)
	if err != nil {
		return -1, err
	}
	pspec := *spec.Process
	pspec.Args = cmd
	pspec.Terminal = tty
	if tty && sio.Resize != nil {
		// The client sends its size as it connects: the terminal starts with it, so the
		// command's first look at its size is right.
		select {
		case s := <-sio.Resize:
			pspec.ConsoleSize = &specs.Box{Width: uint(s.Width), Height: uint(s.Height)}
		case <-time.After(firstSizeWait):
		}
	}

	if stdout == nil {
		stdout = io.Discard
	}
	if stderr == nil {
		stderr = io.Discard
	}
	var eof chan struct{}
	if stdin != nil {
		eof = make(chan struct{})
		stdin = &eofReader{r: stdin, eof: eof}
	}
	opts := []cio.Opt{cio.WithStreams(stdin, stdout, stderr)}
	if tty {
		opts = append(opts, cio.WithTerminal)
	}
	execID := "exec-" + randomHex(6)
	proc, err := task.Exec(ctx, execID, &pspec, cio.NewCreator(opts...))
	if err != nil {
		return -1, fmt.Errorf("exec: %w", err)
	}
	cleanup := context.WithoutCancel(ctx)
	defer proc.Delete(cleanup, containerd.WithProcessKill) //nolint:errcheck // best effort

	exited, err := proc.Wait(ctx)
	if err != nil {
		return -1, err
	}
	if err := proc.Start(ctx); err != nil {
		return -1, fmt.Errorf("exec start: %w", err)
	}
	// The helpers below end with the call, not on exited: its one status is for the wait below.
	ended := make(chan struct{})
	defer close(ended)
	if eof != nil {
		go func() {
			select {
			case <-eof:
				// The shim holds stdin open until told: now the process sees EOF.
				_ = proc.CloseIO(cleanup, containerd.WithStdinCloser)
			case <-ended:
			}
		}()
	}
	if tty && sio.Resize != nil {
		go resizeUntilExit(cleanup, proc, sio.Resize, ended)
	}
	select {
	case st := <-exited:
		proc.IO().Wait() // all output copied before we return
		code, _, err := st.Result()
		return int(code), err
	case <-ctx.Done():
		_ = proc.Kill(cleanup, syscall.SIGKILL)
		return -1, ctx.Err()
	}
}

// resizeUntilExit applies each terminal size to the process until it exits.
func resizeUntilExit(ctx context.Context, proc containerd.Process, sizes <-chan TerminalSize, ended <-chan struct{}) {
	for {
		select {
		case s, ok := <-sizes:
			if !ok {
				return
			}
			_ = proc.Resize(ctx, uint32(s.Width), uint32(s.Height))
		case <-ended:
			return
		}
	}
}

// eofReader signals once its reader is exhausted.
type eofReader struct {
	r    io.Reader
	eof  chan struct{}
	done bool
}

func (e *eofReader) Read(p []byte) (int, error) {
	n, err := e.r.Read(p)
	if err != nil && !e.done {
		e.done = true
		close(e.eof)
	}
	return n, err
}

func randomHex(n int) string {
	b := make([]byte, n)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}

package runtime

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"syscall"

	containerd "github.com/containerd/containerd/v2/client"
	"github.com/containerd/containerd/v2/pkg/cio"
)

// Exec runs cmd in a running container (its namespaces, cgroup, env and
// working dir) and returns its exit code. stdin is read to EOF and then
// closed for the process; nil streams are discarded. A cancelled ctx kills
// the process.
func (r *Runtime) Exec(ctx context.Context, id string, cmd []string, stdin io.Reader, stdout, stderr io.Writer, tty bool) (int, error) {
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
	if eof != nil {
		go func() {
			select {
			case <-eof:
				// The shim holds stdin open until told: now the process sees EOF.
				_ = proc.CloseIO(cleanup, containerd.WithStdinCloser)
			case <-exited:
			}
		}()
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

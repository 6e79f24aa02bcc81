package runtime

import (
	"context"
	"errors"
	"fmt"
	"io"

	containerd "github.com/containerd/containerd/v2/client"

	"github.com/skiff-sh/skiff/actors/nodeapi/attachmsg"
)

// Stdin is one attached client's way into a container's stdin. Several clients may write at
// once, as under the CRI; each Write reaches the process whole.
type Stdin struct {
	r    *Runtime
	id   string
	pipe *stdinPipe
}

var _ io.Writer = (*Stdin)(nil)

func (s *Stdin) Write(b []byte) (int, error) { return s.pipe.write(b) }

// EndsAttach says whether this client's end of input ends its attach. The CRI keeps the
// output of a stdinOnce container without a terminal flowing until the process exits, so
// `kubectl run -i` sees what the program prints after reading all its input.
func (s *Stdin) EndsAttach() bool { return !s.pipe.once || s.pipe.tty }

// Detach is the client leaving. A stdinOnce container's stdin then closes for good, and the
// process reads EOF, unless it has a terminal: the shim tears a terminal down with its input,
// so the CRI, and this runtime, leave it open.
func (s *Stdin) Detach() {
	if s.pipe.once && !s.pipe.tty {
		s.r.dropStdin(s.id)
		// The shim holds the process's end open past the FIFO's EOF until told.
		_ = s.r.closeStdin(s.id)
	}
}

func (r *Runtime) closeStdin(id string) error {
	ctx := r.ctx(context.Background())
	task, err := r.loadTask(ctx, id)
	if err != nil {
		return err
	}
	return task.CloseIO(ctx, containerd.WithStdinCloser)
}

// loadTask is container id's task; ctx carries the runtime's namespace.
func (r *Runtime) loadTask(ctx context.Context, id string) (containerd.Task, error) {
	c, err := r.client.LoadContainer(ctx, id)
	if err != nil {
		return nil, err
	}
	return c.Task(ctx, nil)
}

// AttachStdin gives a client container id's stdin. It fails for a container created without
// stdin, and for one whose stdin closed: a stdinOnce container after its first client, or any
// after the node agent that held the stdin's write end restarted.
func (r *Runtime) AttachStdin(ctx context.Context, id string) (*Stdin, error) {
	r.stdinMu.Lock()
	defer r.stdinMu.Unlock()
	p := r.stdins[id]
	if p == nil {
		c, err := r.client.LoadContainer(r.ctx(ctx), id)
		if err != nil {
			return nil, err
		}
		labels, err := c.Labels(r.ctx(ctx))
		if err != nil {
			return nil, err
		}
		name := labels[labelName]
		if labels[labelStdin] == "" {
			return nil, errors.New(attachmsg.NoStdin(name))
		}
		return nil, fmt.Errorf("stdin: the stdin of container %q is closed (stdinOnce closes it when the first attached client leaves; a node agent restart closes it too)", name)
	}
	return &Stdin{r: r, id: id, pipe: p}, nil
}

// ResizeTerminal sets the size of container id's terminal.
func (r *Runtime) ResizeTerminal(ctx context.Context, id string, size TerminalSize) error {
	ctx = r.ctx(ctx)
	task, err := r.loadTask(ctx, id)
	if err != nil {
		return err
	}
	return task.Resize(ctx, uint32(size.Width), uint32(size.Height))
}

package agent

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"time"

	"github.com/nats-io/nats.go"
	"k8s.io/cri-client/pkg/logs"

	kruntime "github.com/skiff-sh/skiff/actors/kubelet/runtime"
	"github.com/skiff-sh/skiff/actors/kubelet/runtime/crilog"
	"github.com/skiff-sh/skiff/actors/nodeapi"
	"github.com/skiff-sh/skiff/actors/nodeapi/stream"
	"github.com/skiff-sh/skiff/bus/rpc"
)

// serveSessions opens interactive sessions on this node. The open call checks everything it
// can (the container runs, the port answers) so a failure is the caller's error; the session
// then runs in its own goroutine, which ends with the session: at the process's exit, the
// caller's Close, or the session's idle limit when the caller died.
func serveSessions(nc *nats.Conn, node string, rt *kruntime.Runtime) (*nats.Subscription, error) {
	return rpc.Serve(nc, nodeapi.OpenSubject(node), "", nodeapi.Handle(func(ctx context.Context, r nodeapi.OpenRequest) (nodeapi.OpenReply, error) {
		run, err := prepareSession(ctx, rt, r)
		if err != nil {
			return nodeapi.OpenReply{}, err
		}
		s, err := stream.Open(nc, nodeapi.FromNodeSubject(node, r.ID), nodeapi.ToNodeSubject(node, r.ID))
		if err != nil {
			return nodeapi.OpenReply{}, err
		}
		go func() {
			defer s.Close()
			st := run(s)
			_ = s.Exit(st)
		}()
		return nodeapi.OpenReply{}, nil
	}))
}

// prepareSession checks r and returns what runs the session.
func prepareSession(ctx context.Context, rt *kruntime.Runtime, r nodeapi.OpenRequest) (func(*stream.Session) stream.ExitStatus, error) {
	if !stream.ValidID(r.ID) {
		return nil, fmt.Errorf("session id %q is not one the apiserver makes", r.ID)
	}
	if r.Kind == nodeapi.SessionPortForward {
		if r.Port < 1 || r.Port > 65535 {
			return nil, fmt.Errorf("port %d is not a TCP port", r.Port)
		}
		conn, err := rt.DialPod(ctx, r.PodUID, r.Port)
		if err != nil {
			return nil, fmt.Errorf("connecting to port %d in pod %s: %w", r.Port, r.PodUID, err)
		}
		return func(s *stream.Session) stream.ExitStatus { return forward(s, conn) }, nil
	}
	c, err := findContainer(ctx, rt, r.PodUID, r.Container)
	if err != nil {
		return nil, err
	}
	if r.Kind == nodeapi.SessionLog {
		return prepareLog(rt, c, r)
	}
	if c.State != kruntime.StateRunning {
		return nil, fmt.Errorf("container %q is not running (%s)", c.Name, c.State)
	}
	switch r.Kind {
	case nodeapi.SessionExec:
		return func(s *stream.Session) stream.ExitStatus { return execSession(rt, c.ID, r, s) }, nil
	case nodeapi.SessionAttach:
		var in *kruntime.Stdin
		if r.Stdin {
			if in, err = rt.AttachStdin(ctx, c.ID); err != nil {
				return nil, err
			}
		}
		return func(s *stream.Session) stream.ExitStatus { return attachSession(rt, c, in, s) }, nil
	}
	return nil, fmt.Errorf("session kind %q is not one of exec, attach, log, portforward", r.Kind)
}

// failed is the exit status of a session that could not finish; the apiserver reports Message.
func failed(err error) stream.ExitStatus { return stream.ExitStatus{Code: -1, Message: err.Error()} }

// execSession runs the command with the session's channels as its stdio; a session that ends
// first (the client went away) kills it.
func execSession(rt *kruntime.Runtime, id string, r nodeapi.OpenRequest, s *stream.Session) stream.ExitStatus {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	resize := make(chan kruntime.TerminalSize)
	go func() {
		for {
			select {
			case size := <-s.Resizes():
				select {
				case resize <- kruntime.TerminalSize{Width: size.Width, Height: size.Height}:
				case <-ctx.Done():
					return
				}
			case <-s.Done():
				cancel()
				return
			case <-ctx.Done():
				return
			}
		}
	}()
	sio := kruntime.ExecIO{Stdout: s.Writer(1), Stderr: s.Writer(2), TTY: r.TTY, Resize: resize}
	if r.Stdin {
		sio.Stdin = s.Reader(0)
	}
	code, err := rt.ExecInteractive(ctx, id, r.Command, sio)
	if err != nil {
		return failed(err)
	}
	_ = s.CloseChannel(1)
	_ = s.CloseChannel(2)
	return stream.ExitStatus{Code: int32(code)}
}

// attachSession feeds the client's input to the container's stdin (in; nil when the client
// sends none) and its terminal sizes to the container's terminal, and streams the output.
// As under the CRI, the end of the client's input ends the attach, except for a stdinOnce
// container without a terminal, whose output flows until it exits.
func attachSession(rt *kruntime.Runtime, c kruntime.ContainerStatus, in *kruntime.Stdin, s *stream.Session) stream.ExitStatus {
	log, err := openAttachLog(c.LogPath)
	if err != nil {
		if in != nil {
			in.Detach()
		}
		return failed(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	if c.TTY {
		go func() {
			for {
				select {
				case size := <-s.Resizes():
					_ = rt.ResizeTerminal(ctx, c.ID, kruntime.TerminalSize{Width: size.Width, Height: size.Height})
				case <-ctx.Done():
					return
				}
			}
		}()
	}
	running := containerRunning(rt, c.ID)
	if in != nil {
		ended := make(chan struct{})
		go func() {
			defer close(ended)
			_, _ = io.Copy(in, s.Reader(0))
			in.Detach()
		}()
		if in.EndsAttach() {
			// The follow ends at the log's end once the input has: the answers to input
			// that came before its end are written by then.
			running = func(ctx context.Context) (bool, error) {
				select {
				case <-ended:
					return false, nil
				default:
					return rt.IsRunning(ctx, c.ID), nil
				}
			}
		}
	}
	return copyLog(s, log, running, s.Writer(1), s.Writer(2))
}

// openAttachLog follows the log from now on by the records' times, so output answering input
// sent right after is not missed; a log from before the CRI format has no times and is
// followed from its end.
func openAttachLog(path string) (*crilog.Log, error) {
	log, err := crilog.Open(path, &logs.LogOptions{Since: time.Now(), Follow: true})
	if errors.Is(err, crilog.ErrNoTimes) {
		tail := int64(0)
		log, err = crilog.Open(path, &logs.LogOptions{TailLines: &tail, Follow: true})
	}
	return log, err
}

// forward copies the session's channel 0 to the pod's connection and the connection's bytes
// to channel 1.
func forward(s *stream.Session, conn net.Conn) stream.ExitStatus {
	defer conn.Close()
	go func() {
		<-s.Done()
		_ = conn.Close() // unblocks the copy from the pod
	}()
	toPod := make(chan error, 1)
	go func() {
		_, err := io.Copy(conn, s.Reader(0))
		if tc, ok := conn.(*net.TCPConn); ok && err == nil {
			_ = tc.CloseWrite()
		}
		toPod <- err
	}()
	_, err := io.Copy(s.Writer(1), conn)
	_ = s.CloseChannel(1)
	if err2 := <-toPod; err == nil {
		err = err2
	}
	if err != nil && !errors.Is(err, net.ErrClosed) {
		return failed(err)
	}
	return stream.ExitStatus{}
}

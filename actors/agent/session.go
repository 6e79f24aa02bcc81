package agent

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"

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
		if r.Stdin {
			return nil, errors.New("stdin: containers run without stdin on Skiff, attach carries their output only")
		}
		tail := int64(0) // output from now on
		log, err := crilog.Open(c.LogPath, &logs.LogOptions{TailLines: &tail, Follow: true})
		if err != nil {
			return nil, err
		}
		return func(s *stream.Session) stream.ExitStatus {
			return copyLog(s, log, containerRunning(rt, c.ID), s.Writer(1), s.Writer(2))
		}, nil
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

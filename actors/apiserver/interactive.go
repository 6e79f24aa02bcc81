package apiserver

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/httpstream/wsstream"
	crirc "k8s.io/cri-streaming/pkg/streaming/remotecommand"
	"k8s.io/utils/exec"

	"github.com/skiff-sh/skiff/actors/nodeapi"
	"github.com/skiff-sh/skiff/actors/nodeapi/stream"
)

// Timeouts of interactive streams, the kubelet's: an idle connection, and the wait for a SPDY
// client to open its streams.
const (
	streamIdleTimeout     = 4 * time.Hour
	streamCreationTimeout = 30 * time.Second
)

// sessionIO are the client's ends of a session; nil ones are not requested.
type sessionIO struct {
	stdin          io.Reader
	stdout, stderr io.Writer
	resize         <-chan stream.Size
}

// openSession asks the pod's node to start req, with its frames between this apiserver and the
// node only.
func (s *Server) openSession(ctx context.Context, pod *corev1.Pod, req nodeapi.OpenRequest) (*stream.Session, error) {
	req.ID, req.PodUID = stream.NewID(), string(pod.UID)
	node := pod.Spec.NodeName
	sess, err := stream.Open(s.opts.NodeConn, nodeapi.ToNodeSubject(node, req.ID), nodeapi.FromNodeSubject(node, req.ID))
	if err != nil {
		return nil, err
	}
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	if err := nodeapi.Call(ctx, s.opts.NodeConn, nodeapi.OpenSubject(node), req, &nodeapi.OpenReply{}); err != nil {
		sess.Close()
		return nil, fmt.Errorf("%s in %s on node %s: %w", req.Kind, pod.Name, node, err)
	}
	return sess, nil
}

// runSession copies between the client and an open session until the node's exit status has
// arrived and all output before it was written, or ctx ends. A non-zero exit is an
// exec.CodeExitError, as the kubelet's runtimes return.
func runSession(ctx context.Context, sess *stream.Session, sio sessionIO) error {
	defer sess.Close()
	stop := context.AfterFunc(ctx, sess.Close)
	defer stop()
	if sio.stdin != nil {
		go func() {
			if _, err := io.Copy(sess.Writer(0), sio.stdin); err == nil {
				_ = sess.CloseChannel(0)
			}
		}()
	}
	if sio.resize != nil {
		go func() {
			for {
				select {
				case size, ok := <-sio.resize:
					if !ok {
						return
					}
					_ = sess.Resize(size)
				case <-sess.Done():
					return
				}
			}
		}()
	}
	// Both output channels are drained even when unwanted: they share the session's credit.
	var wg sync.WaitGroup
	for ch, w := range map[byte]io.Writer{1: sio.stdout, 2: sio.stderr} {
		if w == nil {
			w = io.Discard
		}
		wg.Go(func() { _, _ = io.Copy(w, sess.Reader(ch)) })
	}
	wg.Wait()
	<-sess.Done()
	st, ok := sess.Exited()
	switch {
	case !ok:
		return sess.Err()
	case st.Code < 0:
		return errors.New(st.Message)
	case st.Code > 0:
		return exec.CodeExitError{Err: fmt.Errorf("command terminated with non-zero exit code: exit status %d", st.Code), Code: int(st.Code)}
	}
	return nil
}

// remoteCommand is one exec or attach request as both protocols see it.
type remoteCommand struct {
	kind      string
	pod       *corev1.Pod
	container string
	command   []string
	opts      *crirc.Options
}

func (rc remoteCommand) open(s *Server, ctx context.Context) (*stream.Session, error) {
	return s.openSession(ctx, rc.pod, nodeapi.OpenRequest{Kind: rc.kind, Container: rc.container,
		Command: rc.command, Stdin: rc.opts.Stdin, TTY: rc.opts.TTY})
}

// serveRemoteCommand serves an interactive exec or attach: the WebSocket channel protocol
// (v5, which kubectl speaks first, and v4) here, SPDY (kubectl's fallback) through the
// kubelet's own server code, both on a session to the node.
func (s *Server) serveRemoteCommand(w http.ResponseWriter, r *http.Request, rc remoteCommand) {
	if wsstream.IsWebSocketRequest(r) {
		s.serveWebSocketCommand(w, r, rc)
		return
	}
	run := func(ctx context.Context, in io.Reader, out, errw io.WriteCloser, resize <-chan crirc.TerminalSize) error {
		sess, err := rc.open(s, ctx)
		if err != nil {
			return err
		}
		return runSession(ctx, sess, sessionIO{stdin: in, stdout: writerOrNil(out), stderr: writerOrNil(errw), resize: sizes(ctx, resize)})
	}
	if rc.kind == nodeapi.SessionAttach {
		crirc.ServeAttach(w, r, attacher(run), rc.pod.Name, string(rc.pod.UID), rc.container, rc.opts,
			streamIdleTimeout, streamCreationTimeout, crirc.SupportedStreamingProtocols)
		return
	}
	crirc.ServeExec(w, r, executor(run), rc.pod.Name, string(rc.pod.UID), rc.container, rc.command, rc.opts,
		streamIdleTimeout, streamCreationTimeout, crirc.SupportedStreamingProtocols)
}

// writerOrNil keeps a nil stream nil (an interface holding a nil pointer is not).
func writerOrNil(w io.WriteCloser) io.Writer {
	if w == nil {
		return nil
	}
	return w
}

// sizes converts the kubelet code's terminal sizes until ctx ends.
func sizes(ctx context.Context, in <-chan crirc.TerminalSize) <-chan stream.Size {
	if in == nil {
		return nil
	}
	out := make(chan stream.Size)
	go func() {
		defer close(out)
		for {
			select {
			case size, ok := <-in:
				if !ok {
					return
				}
				select {
				case out <- stream.Size(size):
				case <-ctx.Done():
					return
				}
			case <-ctx.Done():
				return
			}
		}
	}()
	return out
}

type runFunc func(ctx context.Context, in io.Reader, out, errw io.WriteCloser, resize <-chan crirc.TerminalSize) error

type executor runFunc

func (f executor) ExecInContainer(ctx context.Context, _, _, _ string, _ []string, in io.Reader, out, errw io.WriteCloser, _ bool, resize <-chan crirc.TerminalSize, _ time.Duration) error {
	return f(ctx, in, out, errw, resize)
}

type attacher runFunc

func (f attacher) AttachContainer(ctx context.Context, _, _, _ string, in io.Reader, out, errw io.WriteCloser, _ bool, resize <-chan crirc.TerminalSize) error {
	return f(ctx, in, out, errw, resize)
}

// serveWebSocketCommand speaks the WebSocket channel protocol: channels 0 stdin, 1 stdout,
// 2 stderr, 3 the final status, 4 terminal sizes as JSON; v5 adds the client's close of stdin.
func (s *Server) serveWebSocketCommand(w http.ResponseWriter, r *http.Request, rc remoteCommand) {
	ch := func(want bool, t wsstream.ChannelType) wsstream.ChannelType {
		if want {
			return t
		}
		return wsstream.IgnoreChannel
	}
	o := rc.opts
	cfg := wsstream.ChannelProtocolConfig{Binary: true, Channels: []wsstream.ChannelType{
		ch(o.Stdin, wsstream.ReadChannel), ch(o.Stdout, wsstream.WriteChannel), ch(o.Stderr, wsstream.WriteChannel),
		wsstream.WriteChannel, ch(o.TTY, wsstream.ReadChannel)}}
	conn := wsstream.NewConn(map[string]wsstream.ChannelProtocolConfig{
		crirc.StreamProtocolV5Name: cfg, crirc.StreamProtocolV4Name: cfg})
	conn.SetIdleTimeout(streamIdleTimeout)
	_, streams, err := conn.Open(w, r)
	if err != nil {
		return
	}
	defer conn.Close()
	// An empty frame on the first output channel tells the client the streams are ready.
	first := 3
	if o.Stdout {
		first = 1
	} else if o.Stderr {
		first = 2
	}
	_, _ = streams[first].Write(nil)

	ctx := r.Context()
	sio := sessionIO{}
	if o.Stdin {
		sio.stdin = streams[0]
	}
	if o.Stdout {
		sio.stdout = streams[1]
	}
	if o.Stderr {
		sio.stderr = streams[2]
	}
	if o.TTY {
		sio.resize = decodeSizes(ctx, streams[4])
	}
	sess, err := rc.open(s, ctx)
	if err == nil {
		err = runSession(ctx, sess, sio)
	}
	status, _ := json.Marshal(commandStatus(err))
	_, _ = streams[3].Write(status)
}

// decodeSizes reads the resize channel's JSON objects until it closes or ctx ends.
func decodeSizes(ctx context.Context, r io.Reader) <-chan stream.Size {
	out := make(chan stream.Size)
	go func() {
		defer close(out)
		dec := json.NewDecoder(r)
		for {
			var size stream.Size
			if dec.Decode(&size) != nil {
				return
			}
			select {
			case out <- size:
			case <-ctx.Done():
				return
			}
		}
	}()
	return out
}

// commandStatus is the status the error channel carries, as the kubelet writes it.
func commandStatus(err error) metav1.Status {
	var exit exec.CodeExitError
	switch {
	case err == nil:
		return metav1.Status{Status: metav1.StatusSuccess}
	case errors.As(err, &exit):
		return metav1.Status{Status: metav1.StatusFailure, Reason: crirc.NonZeroExitCodeReason, Message: err.Error(),
			Details: &metav1.StatusDetails{Causes: []metav1.StatusCause{{Type: crirc.ExitCodeCauseType, Message: strconv.Itoa(exit.Code)}}}}
	}
	return apierrors.NewInternalError(err).ErrStatus
}

package apiserver

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/httpstream/wsstream"

	"github.com/skiff-sh/skiff/actors/nodeapi"
	"github.com/skiff-sh/skiff/schemas"
)

// followPoll is how often a followed log asks its node for new bytes.
const followPoll = 250 * time.Millisecond

// podContainer resolves the pod and the container a log/exec request is about, with the
// errors kubectl users know.
func (s *Server) podContainer(ctx context.Context, k *schemas.Kind, info requestInfo) (*corev1.Pod, string, error) {
	if s.opts.NodeConn == nil {
		return nil, "", apierrors.NewServiceUnavailable("this apiserver has no connection to the nodes")
	}
	obj, err := s.get(ctx, k, info.namespace, info.name)
	if err != nil {
		return nil, "", err
	}
	pod := obj.(*corev1.Pod)
	name := info.query.Get("container")
	if name == "" {
		if len(pod.Spec.Containers) != 1 {
			var names []string
			for _, c := range pod.Spec.Containers {
				names = append(names, c.Name)
			}
			return nil, "", badRequest("a container name must be specified for pod %s, choose one of: [%s]", pod.Name, strings.Join(names, " "))
		}
		name = pod.Spec.Containers[0].Name
	}
	if pod.Spec.NodeName == "" {
		return nil, "", badRequest("container %q in pod %q is waiting to start: the pod is not scheduled", name, pod.Name)
	}
	return pod, name, nil
}

// serveLog streams a container's log from its node (pods/log): tailLines, previous, follow.
func (s *Server) serveLog(w http.ResponseWriter, r *http.Request, k *schemas.Kind, info requestInfo) {
	ctx := r.Context()
	pod, container, err := s.podContainer(ctx, k, info)
	if err != nil {
		writeError(w, err)
		return
	}
	req := nodeapi.LogRequest{PodUID: string(pod.UID), Container: container, Previous: info.query.Get("previous") == "true"}
	if t := info.query.Get("tailLines"); t != "" {
		if req.TailLines, err = strconv.ParseInt(t, 10, 64); err != nil || req.TailLines < 0 {
			writeError(w, badRequest("tailLines: %q is not a whole number", t))
			return
		}
	}
	follow := info.query.Get("follow") == "true"
	w.Header().Set("Content-Type", "text/plain")
	flusher, _ := w.(http.Flusher)
	for first := true; ; first = false {
		var rep nodeapi.LogReply
		callCtx, cancel := context.WithTimeout(ctx, 10*time.Second)
		err := nodeapi.Call(callCtx, s.opts.NodeConn, nodeapi.LogSubject(pod.Spec.NodeName), req, &rep)
		cancel()
		if err != nil {
			if first {
				writeError(w, apierrors.NewBadRequest(fmt.Sprintf("reading the log of %s/%s on node %s: %v", pod.Name, container, pod.Spec.NodeName, err)))
			}
			return
		}
		if first {
			w.WriteHeader(http.StatusOK)
		}
		if _, err := w.Write(rep.Data); err != nil {
			return
		}
		if flusher != nil {
			flusher.Flush()
		}
		if !follow || (!rep.Running && rep.NextOffset == req.Offset) {
			return
		}
		idle := rep.NextOffset == req.Offset
		req.Offset, req.TailLines = rep.NextOffset, 0
		if idle {
			select {
			case <-ctx.Done():
				return
			case <-time.After(followPoll):
			}
		}
	}
}

// serveExec runs a command in a container without a terminal (pods/exec with POST, the body as
// stdin). Interactive exec over SPDY/WebSocket upgrades is not served.
func (s *Server) serveExec(w http.ResponseWriter, r *http.Request, k *schemas.Kind, info requestInfo, stdin []byte) {
	websocket := wsstream.IsWebSocketRequest(r)
	if !websocket && (r.Header.Get("Upgrade") != "" || r.Header.Get("Connection") == "Upgrade") {
		writeError(w, badRequest("exec over SPDY is not supported; use a client that speaks the WebSocket channel protocol (kubectl does) or `skiff exec`"))
		return
	}
	if info.query.Get("tty") == "true" {
		writeError(w, badRequest("tty: exec with a terminal is not supported yet"))
		return
	}
	pod, container, err := s.podContainer(r.Context(), k, info)
	if err != nil {
		writeError(w, err)
		return
	}
	cmd := info.query["command"]
	if len(cmd) == 0 {
		writeError(w, badRequest("command: at least one is required"))
		return
	}
	if websocket {
		s.execStream(w, r, pod, container, cmd, info.query.Get("stdin") == "true")
		return
	}
	rep, err := s.execOnNode(r.Context(), pod, container, cmd, stdin)
	if err != nil {
		writeError(w, apierrors.NewBadRequest(fmt.Sprintf("exec in %s/%s on node %s: %v", pod.Name, container, pod.Spec.NodeName, err)))
		return
	}
	w.Header().Set("Content-Type", "application/json")
	_ = json.NewEncoder(w).Encode(rep)
}

func (s *Server) execOnNode(ctx context.Context, pod *corev1.Pod, container string, cmd []string, stdin []byte) (nodeapi.ExecReply, error) {
	var rep nodeapi.ExecReply
	ctx, cancel := context.WithTimeout(ctx, 5*time.Minute)
	defer cancel()
	err := nodeapi.Call(ctx, s.opts.NodeConn, nodeapi.ExecSubject(pod.Spec.NodeName),
		nodeapi.ExecRequest{PodUID: string(pod.UID), Container: container, Command: cmd, Stdin: stdin}, &rep)
	return rep, err
}

// execStream serves kubectl exec over the Kubernetes WebSocket channel protocol (channels:
// 0 stdin, 1 stdout, 2 stderr, 3 error/status, 4 resize). The node runs the command to the end
// and the output is sent then: no terminal, no interleaving of a long-running command's output.
func (s *Server) execStream(w http.ResponseWriter, r *http.Request, pod *corev1.Pod, container string, cmd []string, withStdin bool) {
	cfg := wsstream.ChannelProtocolConfig{Binary: true, Channels: []wsstream.ChannelType{
		wsstream.ReadChannel, wsstream.WriteChannel, wsstream.WriteChannel, wsstream.WriteChannel, wsstream.ReadChannel}}
	conn := wsstream.NewConn(map[string]wsstream.ChannelProtocolConfig{
		"v5.channel.k8s.io": cfg, "v4.channel.k8s.io": cfg})
	conn.SetIdleTimeout(time.Hour)
	_, streams, err := conn.Open(w, r)
	if err != nil {
		return
	}
	defer conn.Close()
	var stdin []byte
	if withStdin {
		stdin, _ = io.ReadAll(streams[0])
	}
	rep, err := s.execOnNode(r.Context(), pod, container, cmd, stdin)
	st := metav1.Status{Status: metav1.StatusSuccess}
	switch {
	case err != nil:
		st = metav1.Status{Status: metav1.StatusFailure, Reason: metav1.StatusReasonInternalError, Message: err.Error()}
	case rep.ExitCode != 0:
		st = metav1.Status{Status: metav1.StatusFailure, Reason: "NonZeroExitCode",
			Message: fmt.Sprintf("command terminated with non-zero exit code: exit status %d", rep.ExitCode),
			Details: &metav1.StatusDetails{Causes: []metav1.StatusCause{{Type: "ExitCode", Message: strconv.Itoa(rep.ExitCode)}}}}
	}
	_, _ = streams[1].Write(rep.Stdout)
	_, _ = streams[2].Write(rep.Stderr)
	status, _ := json.Marshal(st)
	_, _ = streams[3].Write(status)
}

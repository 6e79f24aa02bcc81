package apiserver

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/util/httpstream"
	"k8s.io/apimachinery/pkg/util/httpstream/wsstream"
	crirc "k8s.io/cri-streaming/pkg/streaming/remotecommand"

	"github.com/skiff-sh/skiff/actors/nodeapi"
	"github.com/skiff-sh/skiff/actors/nodeapi/attachmsg"
	"github.com/skiff-sh/skiff/schemas"
)

// podContainer resolves the pod and the container a log/exec request is about, with the
// errors kubectl users know.
func (s *Server) podContainer(ctx context.Context, k *schemas.Kind, info requestInfo) (*corev1.Pod, string, error) {
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
	// A finished pod's node keeps its logs but runs nothing: refused as kube-apiserver does.
	if verb := map[string]string{"exec": "exec into", "attach": "attach to"}[info.subresource]; verb != "" &&
		(pod.Status.Phase == corev1.PodSucceeded || pod.Status.Phase == corev1.PodFailed) {
		return nil, "", badRequest("cannot %s a container in a completed pod; current phase is %s", verb, pod.Status.Phase)
	}
	if s.opts.NodeConn == nil {
		return nil, "", apierrors.NewServiceUnavailable("this apiserver has no connection to the nodes")
	}
	return pod, name, nil
}

// serveConnect serves the streams of a pod (connectSubresources), by GET or POST.
func (s *Server) serveConnect(w http.ResponseWriter, r *http.Request, k *schemas.Kind, info requestInfo, body []byte) {
	switch info.subresource {
	case "exec":
		s.serveExec(w, r, k, info, body)
	case "attach":
		s.serveAttach(w, r, k, info)
	case "portforward":
		s.servePodPortForward(w, r, k, info)
	}
}

// serveExec runs a command in a container (pods/exec): interactively over a WebSocket or SPDY
// upgrade, or with POST and no upgrade, the body as stdin and the output as a JSON reply.
func (s *Server) serveExec(w http.ResponseWriter, r *http.Request, k *schemas.Kind, info requestInfo, stdin []byte) {
	opts, err := streamOptions(info)
	if err != nil {
		writeError(w, err)
		return
	}
	cmd := info.query["command"]
	if len(cmd) == 0 {
		writeError(w, badRequest("command: at least one is required"))
		return
	}
	streaming := isStreamUpgrade(r)
	if streaming {
		err = requireStream(opts)
	} else if opts.TTY {
		err = badRequest("tty: a terminal needs a streaming connection (a WebSocket or SPDY upgrade, as kubectl exec -t makes)")
	}
	pod, container, ok := s.checkedPodContainer(w, r, k, info, err)
	if !ok {
		return
	}
	if streaming {
		s.serveRemoteCommand(w, r, remoteCommand{kind: nodeapi.SessionExec, pod: pod, container: container, command: cmd, opts: opts})
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

// serveAttach connects to a running container's process (pods/attach): its output, and its
// stdin when the container has one. Whether there is a terminal is the container's, as the
// kubelet decides it, not the request's: a process's terminal cannot change once it runs.
func (s *Server) serveAttach(w http.ResponseWriter, r *http.Request, k *schemas.Kind, info requestInfo) {
	opts, err := streamOptions(info)
	switch {
	case err != nil:
	case requireStream(opts) != nil:
		err = requireStream(opts)
	}
	pod, container, ok := s.checkedPodContainer(w, r, k, info, err)
	if !ok {
		return
	}
	spec := specContainer(pod, container)
	switch {
	case spec == nil:
		err = badRequest("container %s is not valid for pod %s", container, pod.Name)
	case opts.Stdin && !spec.Stdin:
		// The CRI drops such input unread; refused here so the client knows it goes nowhere.
		err = badRequest("%s", attachmsg.NoStdin(container))
	case !isStreamUpgrade(r):
		err = badRequest("attach needs a streaming connection (a WebSocket or SPDY upgrade, as kubectl attach makes)")
	}
	if err != nil {
		writeError(w, err)
		return
	}
	opts.TTY = spec.TTY
	if opts.TTY {
		opts.Stderr = false
	}
	s.serveRemoteCommand(w, r, remoteCommand{kind: nodeapi.SessionAttach, pod: pod, container: container, opts: opts})
}

// specContainer is the pod's container or init container by name.
func specContainer(pod *corev1.Pod, name string) *corev1.Container {
	for _, list := range [][]corev1.Container{pod.Spec.Containers, pod.Spec.InitContainers} {
		for i := range list {
			if list[i].Name == name {
				return &list[i]
			}
		}
	}
	return nil
}

// checkedPodContainer writes checkErr, the request's own fault, or else resolves its pod and
// container (podContainer); ok says whether the caller goes on.
func (s *Server) checkedPodContainer(w http.ResponseWriter, r *http.Request, k *schemas.Kind, info requestInfo, checkErr error) (*corev1.Pod, string, bool) {
	if checkErr != nil {
		writeError(w, checkErr)
		return nil, "", false
	}
	pod, container, err := s.podContainer(r.Context(), k, info)
	if err != nil {
		writeError(w, err)
		return nil, "", false
	}
	return pod, container, true
}

// servePodPortForward checks a pods/portforward request before its upgrade.
func (s *Server) servePodPortForward(w http.ResponseWriter, r *http.Request, k *schemas.Kind, info requestInfo) {
	if !isStreamUpgrade(r) {
		writeError(w, badRequest("port-forward needs a streaming connection (a WebSocket or SPDY upgrade, as kubectl port-forward makes)"))
		return
	}
	if s.opts.NodeConn == nil {
		writeError(w, apierrors.NewServiceUnavailable("this apiserver has no connection to the nodes"))
		return
	}
	obj, err := s.get(r.Context(), k, info.namespace, info.name)
	if err != nil {
		writeError(w, err)
		return
	}
	pod := obj.(*corev1.Pod)
	if pod.Spec.NodeName == "" || pod.Status.Phase != corev1.PodRunning {
		writeError(w, badRequest("unable to forward ports to pod %s: the pod is not running (phase %q)", pod.Name, pod.Status.Phase))
		return
	}
	s.servePortForward(w, r, pod)
}

// isStreamUpgrade says whether r asks for a WebSocket or SPDY stream.
func isStreamUpgrade(r *http.Request) bool {
	return wsstream.IsWebSocketRequest(r) || httpstream.IsUpgradeRequest(r)
}

// streamOptions reads stdin, stdout, stderr and tty (kubectl sends them as "true"); a terminal
// carries stderr in stdout, as the kubelet does. A POST exec without an upgrade needs none.
func streamOptions(info requestInfo) (*crirc.Options, error) {
	var o crirc.Options
	for name, dst := range map[string]*bool{"stdin": &o.Stdin, "stdout": &o.Stdout, "stderr": &o.Stderr, "tty": &o.TTY} {
		v := info.query.Get(name)
		if v == "" {
			continue
		}
		b, err := strconv.ParseBool(v)
		if err != nil {
			return nil, badRequest("%s: %q is not true or false", name, v)
		}
		*dst = b
	}
	if o.TTY {
		o.Stderr = false
	}
	return &o, nil
}

// requireStream: a stream carries at least one of stdin, stdout, stderr.
func requireStream(o *crirc.Options) error {
	if !o.Stdin && !o.Stdout && !o.Stderr {
		return badRequest("stdin, stdout, stderr: at least one must be true")
	}
	return nil
}

func (s *Server) execOnNode(ctx context.Context, pod *corev1.Pod, container string, cmd []string, stdin []byte) (nodeapi.ExecReply, error) {
	var rep nodeapi.ExecReply
	ctx, cancel := context.WithTimeout(ctx, 5*time.Minute)
	defer cancel()
	err := nodeapi.Call(ctx, s.opts.NodeConn, nodeapi.ExecSubject(pod.Spec.NodeName),
		nodeapi.ExecRequest{PodUID: string(pod.UID), Container: container, Command: cmd, Stdin: stdin}, &rep)
	return rep, err
}

package apiserver

import (
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strconv"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/validation/field"

	"github.com/skiff-sh/skiff/actors/nodeapi"
	"github.com/skiff-sh/skiff/schemas"
)

// serveLog streams a container's log from its node (pods/log) on a session: the node reads
// its CRI log file with the kubelet's reader, so every PodLogOptions field is served as the
// kubelet serves it (timestamps, since, tail, byte limit, follow, previous).
func (s *Server) serveLog(w http.ResponseWriter, r *http.Request, k *schemas.Kind, info requestInfo) {
	opts, err := podLogOptions(info.query)
	if err == nil {
		err = validatePodLogOptions(info.name, opts)
	}
	if err != nil {
		writeError(w, err)
		return
	}
	pod, container, err := s.podContainer(r.Context(), k, info)
	if err != nil {
		writeError(w, err)
		return
	}
	sess, err := s.openSession(r.Context(), pod, nodeapi.OpenRequest{Kind: nodeapi.SessionLog, Container: container, Log: opts})
	if err != nil {
		writeError(w, apierrors.NewBadRequest(fmt.Sprintf("reading the log of %s/%s on node %s: %v", pod.Name, container, pod.Spec.NodeName, err)))
		return
	}
	w.Header().Set("Content-Type", "text/plain")
	w.WriteHeader(http.StatusOK)
	// A failure after the first byte can only end the stream, as with the kubelet.
	_ = runSession(r.Context(), sess, sessionIO{stdout: flushingWriter(w)})
}

// flushingWriter hands each write to the client at once (a followed log is read live).
func flushingWriter(w http.ResponseWriter) io.Writer {
	f, ok := w.(http.Flusher)
	if !ok {
		return w
	}
	return writeFunc(func(p []byte) (int, error) {
		n, err := w.Write(p)
		f.Flush()
		return n, err
	})
}

type writeFunc func([]byte) (int, error)

func (f writeFunc) Write(p []byte) (int, error) { return f(p) }

// podLogOptions decodes a pods/log query; a value that is not of its field's type is a 400
// naming the field.
func podLogOptions(q url.Values) (*corev1.PodLogOptions, error) {
	o := &corev1.PodLogOptions{Container: q.Get("container")}
	for name, dst := range map[string]*bool{"follow": &o.Follow, "previous": &o.Previous, "timestamps": &o.Timestamps,
		"insecureSkipTLSVerifyBackend": &o.InsecureSkipTLSVerifyBackend} {
		if v := q.Get(name); v != "" {
			b, err := strconv.ParseBool(v)
			if err != nil {
				return nil, badRequest("%s: %q is not true or false", name, v)
			}
			*dst = b
		}
	}
	for name, dst := range map[string]**int64{"sinceSeconds": &o.SinceSeconds, "tailLines": &o.TailLines, "limitBytes": &o.LimitBytes} {
		if v := q.Get(name); v != "" {
			n, err := strconv.ParseInt(v, 10, 64)
			if err != nil {
				return nil, badRequest("%s: %q is not a whole number", name, v)
			}
			*dst = &n
		}
	}
	if v := q.Get("sinceTime"); v != "" {
		var t metav1.Time
		if err := t.UnmarshalQueryParameter(v); err != nil {
			return nil, badRequest("sinceTime: %q is not an RFC3339 time: %v", v, err)
		}
		o.SinceTime = &t
	}
	if v := q.Get("stream"); v != "" && v != corev1.LogStreamAll {
		return nil, badRequest("stream: %q is not served: the log of one stream alone (the PodLogsQuerySplitStreams feature) is not supported; stdout and stderr come together", v)
	}
	return o, nil
}

// validatePodLogOptions refuses what kube-apiserver's PodLogOptions validation refuses, with
// its messages, as 422 Invalid.
func validatePodLogOptions(pod string, o *corev1.PodLogOptions) error {
	var errs field.ErrorList
	if o.TailLines != nil && *o.TailLines < 0 {
		errs = append(errs, field.Invalid(field.NewPath("tailLines"), *o.TailLines, "must be greater than or equal to 0"))
	}
	if o.LimitBytes != nil && *o.LimitBytes < 1 {
		errs = append(errs, field.Invalid(field.NewPath("limitBytes"), *o.LimitBytes, "must be greater than 0"))
	}
	switch {
	case o.SinceSeconds != nil && o.SinceTime != nil:
		errs = append(errs, field.Forbidden(field.NewPath(""), "at most one of `sinceTime` or `sinceSeconds` may be specified"))
	case o.SinceSeconds != nil && *o.SinceSeconds < 1:
		errs = append(errs, field.Invalid(field.NewPath("sinceSeconds"), *o.SinceSeconds, "must be greater than 0"))
	}
	if len(errs) == 0 {
		return nil
	}
	return apierrors.NewInvalid(schema.GroupKind{Kind: "PodLogOptions"}, pod, errs)
}

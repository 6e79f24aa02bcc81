package apiserver

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"io"
	"net"
	"net/http"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/httpstream/wsstream"
	"k8s.io/apiserver/pkg/util/proxy"
	cripf "k8s.io/cri-streaming/pkg/streaming/portforward"

	"github.com/skiff-sh/skiff/actors/nodeapi"
)

// servePortForward serves pods/portforward: SPDY, and SPDY tunnelled in a WebSocket (kubectl's
// default), through the kubelet's own server code; each forwarded connection is a session to
// the node, which connects to the port inside the pod.
func (s *Server) servePortForward(w http.ResponseWriter, r *http.Request, pod *corev1.Pod) {
	fwd := forwarder(func(ctx context.Context, port int32, conn io.ReadWriteCloser) error {
		defer conn.Close()
		sess, err := s.openSession(ctx, pod, nodeapi.OpenRequest{Kind: nodeapi.SessionPortForward, Port: port})
		if err != nil {
			return err
		}
		return runSession(ctx, sess, sessionIO{stdin: conn, stdout: conn})
	})
	serve := func(w http.ResponseWriter, r *http.Request) {
		opts, err := cripf.NewV4Options(r)
		if err != nil && wsstream.IsWebSocketRequest(r) {
			writeError(w, badRequest("ports: %v", err))
			return
		}
		cripf.ServePortForward(w, r, fwd, pod.Name, string(pod.UID), opts, streamIdleTimeout, streamCreationTimeout,
			[]string{cripf.ProtocolV1Name})
	}
	if wsstream.IsWebSocketRequestWithTunnelingProtocol(r) {
		proxy.NewTunnelingHandler(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			serve(&rawUpgradeWriter{ResponseWriter: w}, r)
		})).ServeHTTP(w, r)
		return
	}
	serve(w, r)
}

type forwarder func(ctx context.Context, port int32, conn io.ReadWriteCloser) error

func (f forwarder) PortForward(ctx context.Context, _, _ string, port int32, conn io.ReadWriteCloser) error {
	return f(ctx, port, conn)
}

// rawUpgradeWriter lets the kubelet's SPDY upgrade run inside the apiserver's WebSocket
// tunnel: the tunnel expects the 101 response as bytes on the hijacked connection, as a proxy
// to a kubelet would copy them, while the upgrader answers through WriteHeader first.
type rawUpgradeWriter struct {
	http.ResponseWriter
	upgrade bool
}

func (w *rawUpgradeWriter) WriteHeader(code int) {
	if code == http.StatusSwitchingProtocols {
		w.upgrade = true
		return
	}
	w.ResponseWriter.WriteHeader(code)
}

func (w *rawUpgradeWriter) Hijack() (net.Conn, *bufio.ReadWriter, error) {
	conn, _, err := w.ResponseWriter.(http.Hijacker).Hijack()
	if err != nil {
		return nil, nil, err
	}
	if !w.upgrade {
		return nil, nil, fmt.Errorf("hijack before the upgrade response")
	}
	var head bytes.Buffer
	head.WriteString("HTTP/1.1 101 Switching Protocols\r\n")
	_ = w.Header().Write(&head)
	head.WriteString("\r\n")
	if _, err := conn.Write(head.Bytes()); err != nil {
		conn.Close()
		return nil, nil, err
	}
	return conn, bufio.NewReadWriter(bufio.NewReader(conn), bufio.NewWriter(conn)), nil
}

package e2e

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/creack/pty"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/remotecommand"

	"github.com/skiff-sh/skiff/testkit/testutil"
)

// kubectlCmd is stock kubectl (built from k8s.io/kubectl) against the node's apiserver.
func kubectlCmd(t *testing.T, bin string, n *node, args ...string) *exec.Cmd {
	cmd := exec.Command(bin, append([]string{"--server", n.cp.URL()}, args...)...)
	cmd.Env = append(os.Environ(), "HOME="+t.TempDir(), "KUBECONFIG=/dev/null")
	return cmd
}

// liveOutput collects what a process writes, for waiting on a line while it still runs.
type liveOutput struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (o *liveOutput) Write(p []byte) (int, error) {
	o.mu.Lock()
	defer o.mu.Unlock()
	return o.buf.Write(p)
}

func (o *liveOutput) String() string {
	o.mu.Lock()
	defer o.mu.Unlock()
	return o.buf.String()
}

func (o *liveOutput) waitFor(t *testing.T, what string) {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for !strings.Contains(o.String(), what) {
		if time.Now().After(deadline) {
			t.Fatalf("waited for %q, got %q", what, o.String())
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func exitCode(err error) int {
	var ee *exec.ExitError
	if errors.As(err, &ee) {
		return ee.ExitCode()
	}
	if err != nil {
		return -1
	}
	return 0
}

// kubectl exec -it, attach, port-forward, cp and logs on a real pod through the apiserver's
// streaming subresources and the node's sessions (one node for all: it is the slow part).
func TestInteractiveDebugging(t *testing.T) {
	began := time.Now()
	n := startNode(t)
	n.apply(t, `
apiVersion: v1
kind: Pod
metadata: {name: debug, labels: {app: debug}}
spec:
  containers:
  - name: echo
    image: skiff.local/httpecho:v1
---
apiVersion: v1
kind: Pod
metadata: {name: stdin-echo, labels: {app: stdin-echo}}
spec:
  containers:
  - name: echo
    image: skiff.local/httpecho:v1
    args: [-interactive]
    stdin: true
`)
	n.waitReady(t, "app=debug", 1)
	kubectl := testutil.BuildBinary(t, "./services/kubectl")

	t.Run("logs and exec without a stream", func(t *testing.T) { logsAndExecWithoutStreams(t, n, kubectl, "debug") })

	for proto, env := range protocols {
		t.Run("exec -it with a terminal and resize over "+proto, func(t *testing.T) {
			execTTY(t, kubectlCmd(t, kubectl, n, "exec", "-it", "debug", "--", "/httpecho", "-interactive"), env)
		})
	}

	t.Run("client-go executors: WebSocket v5 without fallback, and SPDY", func(t *testing.T) {
		u, _ := url.Parse(n.cp.URL() + "/api/v1/namespaces/default/pods/debug/exec?command=/httpecho&command=-interactive&stdin=true&stdout=true&stderr=true")
		cfg := &rest.Config{Host: n.cp.URL()}
		ws, err := remotecommand.NewWebSocketExecutor(cfg, "GET", u.String())
		if err != nil {
			t.Fatal(err)
		}
		spdy, err := remotecommand.NewSPDYExecutor(cfg, "POST", u)
		if err != nil {
			t.Fatal(err)
		}
		for name, ex := range map[string]remotecommand.Executor{"websocket": ws, "spdy": spdy} {
			var out liveOutput
			err := ex.StreamWithContext(context.Background(), remotecommand.StreamOptions{
				Stdin: strings.NewReader("hello\nexit 3\n"), Stdout: &out, Stderr: &out})
			var exit interface{ ExitStatus() int }
			if !errors.As(err, &exit) || exit.ExitStatus() != 3 || !strings.Contains(out.String(), "echo: hello") {
				t.Fatalf("%s: %v %q", name, err, out.String())
			}
		}
	})

	t.Run("exec -i streams stdin and output live", func(t *testing.T) {
		cmd := kubectlCmd(t, kubectl, n, "exec", "-i", "debug", "--", "/httpecho", "-interactive")
		stdin, _ := cmd.StdinPipe()
		var out liveOutput
		cmd.Stdout, cmd.Stderr = &out, &out
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		out.waitFor(t, "tty=false size=none")
		// The answer to a line arrives while the command still runs and stdin is open.
		fmt.Fprintln(stdin, "ping-1")
		out.waitFor(t, "echo: ping-1")
		fmt.Fprintln(stdin, "ping-2")
		out.waitFor(t, "echo: ping-2")
		stdin.Close() // EOF ends the program with 0
		if err := cmd.Wait(); err != nil {
			t.Fatalf("kubectl exec -i: %v %q", err, out.String())
		}
	})

	// Port-forward over each protocol; the WebSocket one stays for the tests after it.
	var local int
	top := t
	for proto, env := range protocols {
		t.Run("port-forward then an HTTP GET over "+proto, func(t *testing.T) {
			port := portForward(t, top, kubectlCmd(t, kubectl, n, "port-forward", "pod/debug", ":8080"), env)
			for i := range 3 { // one forwarded connection each
				resp, err := http.Get(fmt.Sprintf("http://127.0.0.1:%d/", port))
				if err != nil {
					t.Fatalf("GET %d through port-forward: %v", i, err)
				}
				var info struct{ Hostname string }
				err = json.NewDecoder(resp.Body).Decode(&info)
				resp.Body.Close()
				if err != nil || info.Hostname != "debug" {
					t.Fatalf("GET through port-forward: %v %+v", err, info)
				}
			}
			if proto == "websocket" {
				local = port
			}
		})
	}

	t.Run("attach streams the container's output", func(t *testing.T) {
		if local == 0 {
			t.Skip("needs the port-forward")
		}
		out := followWhileSaying(t, kubectlCmd(t, kubectl, n, "attach", "debug"), local, "attached-hello", "attached-hello")
		// The output itself, not the log file's records it was read from.
		if strings.Contains(out, " stdout F ") {
			t.Fatalf("attach shows CRI log records: %q", out)
		}
		if out, err := kubectlCmd(t, kubectl, n, "attach", "-i", "debug").CombinedOutput(); err == nil || !strings.Contains(string(out), "stdin") {
			t.Fatalf("attach -i: want a refusal naming stdin, got %v %q", err, out)
		}
	})

	for proto, env := range protocols {
		t.Run("attach -i feeds a stdin container, a second attach sees its output, over "+proto, func(t *testing.T) {
			n.waitReady(t, "app=stdin-echo", 1)
			watch := kubectlCmd(t, kubectl, n, "attach", "stdin-echo")
			watch.Env = append(watch.Env, env...)
			var watched liveOutput
			watch.Stdout, watch.Stderr = &watched, &watched
			if err := watch.Start(); err != nil {
				t.Fatal(err)
			}
			defer func() { _ = watch.Process.Kill(); _ = watch.Wait() }()

			attachLines(t, kubectlCmd(t, kubectl, n, "attach", "-i", "stdin-echo"), env, proto+"-1", proto+"-2")
			watched.waitFor(t, "echo: "+proto+"-2")
			// The client left, the container runs on with its stdin open for the next one.
			attachLines(t, kubectlCmd(t, kubectl, n, "attach", "-i", "stdin-echo"), env, proto+"-3")
			if p := n.pods(t, "app=stdin-echo"); len(p) != 1 || p[0].Status.Phase != "Running" || p[0].Status.ContainerStatuses[0].RestartCount != 0 {
				t.Fatalf("after the attaches: %+v", p)
			}
		})
	}

	t.Run("run -i --rm returns the output and removes the pod", func(t *testing.T) {
		cmd := kubectlCmd(t, kubectl, n, "run", "run-once", "-i", "--rm", "--restart=Never",
			"--image=skiff.local/httpecho:v1", "--", "-interactive")
		// The end of its input is the end of the program: stdinOnce closes its stdin.
		cmd.Stdin = strings.NewReader("from-run\n")
		out, err := cmd.CombinedOutput()
		if err != nil || !strings.Contains(string(out), "echo: from-run") || !strings.Contains(string(out), `pod "run-once" deleted`) {
			t.Fatalf("kubectl run -i --rm: %v %q", err, out)
		}
		if out, err := kubectlCmd(t, kubectl, n, "get", "pod", "run-once").CombinedOutput(); err == nil || !strings.Contains(string(out), "NotFound") {
			t.Fatalf("the pod after run --rm: %v %q", err, out)
		}
	})

	t.Run("run -it --rm gives a terminal that resizes", func(t *testing.T) {
		cmd := kubectlCmd(t, kubectl, n, "run", "run-tty", "-it", "--rm", "--restart=Never",
			"--image=skiff.local/httpecho:v1", "--", "-interactive")
		driveTerminal(t, cmd, nil, 0)
		testutil.Eventually(t, 30*time.Second, 200*time.Millisecond, func() error {
			if out, err := kubectlCmd(t, kubectl, n, "get", "pod", "run-tty").CombinedOutput(); err == nil || !strings.Contains(string(out), "NotFound") {
				return fmt.Errorf("the pod after run -it --rm: %v %q", err, out)
			}
			return nil
		})
	})

	t.Run("logs --tail and --limit-bytes", func(t *testing.T) {
		if local == 0 {
			t.Skip("needs the port-forward")
		}
		for i := 1; i <= 5; i++ {
			say(t, local, fmt.Sprintf("line-%d", i))
		}
		testutil.Eventually(t, 10*time.Second, 100*time.Millisecond, func() error {
			if out, err := podLogs(t, kubectl, n, "--tail=2"); err != nil || out != "line-4\nline-5\n" {
				return fmt.Errorf("--tail=2: %v %q", err, out)
			}
			return nil
		})
		all, err := podLogs(t, kubectl, n)
		if err != nil {
			t.Fatal(err)
		}
		if out, err := podLogs(t, kubectl, n, "--limit-bytes=9"); err != nil || out != all[:9] {
			t.Fatalf("--limit-bytes=9: %v %q, want %q", err, out, all[:9])
		}
	})

	t.Run("logs --timestamps, --since and --since-time", func(t *testing.T) {
		if local == 0 {
			t.Skip("needs the port-forward")
		}
		logsByTime(t, kubectl, n, local, began)
	})

	t.Run("logs -f", func(t *testing.T) {
		if local == 0 {
			t.Skip("needs the port-forward")
		}
		logsFollow(t, kubectl, n, local)
	})

	t.Run("cp both ways", func(t *testing.T) {
		dir := t.TempDir()
		src := filepath.Join(dir, "notes.txt")
		want := strings.Repeat("a line for kubectl cp\n", 5000) // ~100 KiB: several windows
		if err := os.WriteFile(src, []byte(want), 0o644); err != nil {
			t.Fatal(err)
		}
		if out, err := kubectlCmd(t, kubectl, n, "cp", src, "debug:/tmp/notes.txt").CombinedOutput(); err != nil {
			t.Fatalf("kubectl cp to the pod: %v %q", err, out)
		}
		got, err := kubectlCmd(t, kubectl, n, "exec", "debug", "--", "/httpecho", "-cat", "/tmp/notes.txt").Output()
		if err != nil || string(got) != want {
			t.Fatalf("the file in the pod: %v, %d bytes, want %d", err, len(got), len(want))
		}
		back := filepath.Join(dir, "back.txt")
		if out, err := kubectlCmd(t, kubectl, n, "cp", "debug:/tmp/notes.txt", back).CombinedOutput(); err != nil {
			t.Fatalf("kubectl cp from the pod: %v %q", err, out)
		}
		if got, err := os.ReadFile(back); err != nil || string(got) != want {
			t.Fatalf("copied back: %v, %d bytes", err, len(got))
		}
	})
}

// protocols are kubectl's: WebSocket first (its default), and SPDY when that is turned off.
var protocols = map[string][]string{
	"websocket": nil,
	"spdy":      {"KUBECTL_REMOTE_COMMAND_WEBSOCKETS=false", "KUBECTL_PORT_FORWARD_WEBSOCKETS=false"},
}

// execTTY drives kubectl exec -it of httpecho -interactive through a pseudo-terminal.
func execTTY(t *testing.T, cmd *exec.Cmd, env []string) {
	if out := driveTerminal(t, cmd, env, 7); !strings.Contains(out, "tty=true size=80x24") {
		t.Fatalf("kubectl exec -it: the command's first line is not on an 80x24 terminal: %q", out)
	}
}

// driveTerminal runs kubectl (exec -it or run -it of httpecho -interactive) on an 80x24
// pseudo-terminal: the container sees that size and then a resize, and "exit <code>" ends
// kubectl with code. It returns what kubectl printed.
func driveTerminal(t *testing.T, cmd *exec.Cmd, env []string, code int) string {
	t.Helper()
	cmd.Env = append(cmd.Env, env...)
	ptmx, err := pty.StartWithSize(cmd, &pty.Winsize{Cols: 80, Rows: 24})
	if err != nil {
		t.Fatal(err)
	}
	defer ptmx.Close()
	var out liveOutput
	go func() { _, _ = io.Copy(&out, ptmx) }()
	// Asked until answered: kubectl sends the size as it connects and on SIGWINCH.
	askSize := func(want string) {
		testutil.Eventually(t, 60*time.Second, 200*time.Millisecond, func() error {
			_, _ = ptmx.Write([]byte("size\r"))
			if !strings.Contains(out.String(), want) {
				return fmt.Errorf("no %s yet: %q", want, out.String())
			}
			return nil
		})
	}
	askSize("size=80x24")
	if err := pty.Setsize(ptmx, &pty.Winsize{Cols: 132, Rows: 40}); err != nil {
		t.Fatal(err)
	}
	askSize("size=132x40")
	fmt.Fprintf(ptmx, "exit %d\r", code)
	if got := exitCode(cmd.Wait()); got != code {
		t.Fatalf("%v: exit %d, want %d; output %q", cmd.Args, got, code, out.String())
	}
	return out.String()
}

// attachLines runs kubectl attach -i, sends each line and waits for its echo while stdin is
// still open, then closes stdin: the attach ends and kubectl exits 0.
func attachLines(t *testing.T, cmd *exec.Cmd, env []string, lines ...string) {
	t.Helper()
	cmd.Env = append(cmd.Env, env...)
	stdin, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	var out liveOutput
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	defer func() { _ = cmd.Process.Kill() }()
	for _, line := range lines {
		// kubectl sends nothing before its streams are up: send until the answer shows.
		testutil.Eventually(t, 20*time.Second, 500*time.Millisecond, func() error {
			if strings.Contains(out.String(), "echo: "+line) {
				return nil
			}
			fmt.Fprintln(stdin, line)
			return fmt.Errorf("no echo of %q yet: %q", line, out.String())
		})
	}
	stdin.Close()
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("kubectl attach -i after stdin closed: %v %q", err, out.String())
		}
	case <-time.After(20 * time.Second):
		t.Fatalf("kubectl attach -i did not end with its stdin: %q", out.String())
	}
}

// portForward starts kubectl port-forward and returns its local port; kubectl runs until
// owner ends.
func portForward(t, owner *testing.T, cmd *exec.Cmd, env []string) int {
	t.Helper()
	cmd.Env = append(cmd.Env, env...)
	var out liveOutput
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	owner.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
	out.waitFor(t, "Forwarding from 127.0.0.1:")
	m := regexp.MustCompile(`127\.0\.0\.1:(\d+) -> 8080`).FindStringSubmatch(out.String())
	if m == nil {
		t.Fatalf("no local port in %q", out.String())
	}
	var port int
	fmt.Sscan(m[1], &port)
	return port
}

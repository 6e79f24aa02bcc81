package e2e

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/skiff-sh/skiff/actors/nodeapi"
	"github.com/skiff-sh/skiff/testkit/testutil"
)

// logsAndExecWithoutStreams: logs and exec reach the container through the apiserver's pods/log
// and pods/exec (a POST without an upgrade), and stock kubectl logs reads the same log. It runs
// in TestInteractiveDebugging, on its node and pod.
func logsAndExecWithoutStreams(t *testing.T, n *node, kubectl, pod string) {
	base := n.cp.URL() + "/api/v1/namespaces/default/pods/" + pod

	resp, err := http.Get(base + "/log")
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 200 || !strings.Contains(string(body), "listening on tcp :8080") {
		t.Fatalf("pods/log: HTTP %d %q", resp.StatusCode, body)
	}

	resp, err = http.Post(base+"/exec?command=/httpecho&command=-version", "application/octet-stream", nil)
	if err != nil {
		t.Fatal(err)
	}
	var rep nodeapi.ExecReply
	err = json.NewDecoder(resp.Body).Decode(&rep)
	resp.Body.Close()
	if err != nil || rep.ExitCode != 0 || !strings.HasPrefix(string(rep.Stdout), "httpecho") {
		t.Fatalf("pods/exec: %v %+v", err, rep)
	}

	cmd := exec.Command(kubectl, "--server", n.cp.URL(), "logs", pod, "--tail=1")
	cmd.Env = append(os.Environ(), "HOME="+t.TempDir(), "KUBECONFIG=/dev/null")
	out, err := cmd.CombinedOutput()
	if err != nil || !strings.Contains(string(out), "listening on tcp :8080") || strings.Count(strings.TrimSpace(string(out)), "\n") != 0 {
		t.Fatalf("kubectl logs --tail=1: %v %q", err, out)
	}

	// kubectl exec speaks the WebSocket channel protocol; the exit code comes back too.
	run := func(args ...string) (string, error) {
		cmd := exec.Command(kubectl, append([]string{"--server", n.cp.URL()}, args...)...)
		cmd.Env = append(os.Environ(), "HOME="+t.TempDir(), "KUBECONFIG=/dev/null")
		out, err := cmd.CombinedOutput()
		return string(out), err
	}
	if out, err := run("exec", pod, "--", "/httpecho", "-version"); err != nil || !strings.HasPrefix(out, "httpecho") {
		t.Fatalf("kubectl exec: %v %q", err, out)
	}
	out2, err := run("exec", pod, "--", "/httpecho", "-probe", "http://127.0.0.1:1/")
	var ee *exec.ExitError
	if !errors.As(err, &ee) || ee.ExitCode() != 1 {
		t.Fatalf("kubectl exec of a failing command: want exit 1, got %v %q", err, out2)
	}
}

// say has the debug pod print line on its stdout (httpecho's /say), through the port-forward.
func say(t *testing.T, local int, line string) {
	t.Helper()
	resp, err := http.Get(fmt.Sprintf("http://127.0.0.1:%d/say?line=%s", local, line))
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
}

// podLogs is stock kubectl logs of the debug pod.
func podLogs(t *testing.T, kubectl string, n *node, args ...string) (string, error) {
	out, err := kubectlCmd(t, kubectl, n, append([]string{"logs", "debug"}, args...)...).CombinedOutput()
	return string(out), err
}

// logsByTime: the node keeps each line's time, so kubectl logs --timestamps prefixes every
// line with it, and --since / --since-time return only the lines after. Two bursts of lines
// with a quiet gap between (rather than a steady line a second) give each a boundary no
// scheduling delay on a loaded machine can blur.
func logsByTime(t *testing.T, kubectl string, n *node, local int, began time.Time) {
	for i := range 3 {
		say(t, local, fmt.Sprintf("early-%d", i))
	}
	const gap = 10 * time.Second
	time.Sleep(gap / 2)
	boundary := time.Now()
	time.Sleep(gap / 2)
	lateAt := time.Now()
	for i := range 3 {
		say(t, local, fmt.Sprintf("late-%d", i))
	}
	const late = "late-0\nlate-1\nlate-2\n"
	testutil.Eventually(t, 10*time.Second, 100*time.Millisecond, func() error {
		if out, err := podLogs(t, kubectl, n, "--tail=3"); err != nil || out != late {
			return fmt.Errorf("--tail=3: %v %q", err, out)
		}
		return nil
	})

	out, err := podLogs(t, kubectl, n, "--timestamps")
	if err != nil {
		t.Fatalf("--timestamps: %v %q", err, out)
	}
	now := time.Now()
	lines := strings.Split(strings.TrimSuffix(out, "\n"), "\n")
	for _, line := range lines {
		stamp, _, _ := strings.Cut(line, " ")
		at, err := time.Parse(time.RFC3339Nano, stamp)
		if err != nil || at.Before(began) || at.After(now) {
			t.Fatalf("--timestamps: line %q does not start with a time between %s and %s (%v)", line, began.Format(time.RFC3339Nano), now.Format(time.RFC3339Nano), err)
		}
	}
	if last := lines[len(lines)-1]; !strings.HasSuffix(last, " late-2") {
		t.Fatalf("--timestamps: last line %q, want late-2 after its time", last)
	}

	// --since=Ns counts back from the node's read: N reaches past the late lines by half the
	// gap, and so stops half a gap short of the early ones, whatever kubectl's start costs
	// up to that.
	since := int((time.Since(lateAt) + gap/2).Seconds())
	if out, err := podLogs(t, kubectl, n, fmt.Sprintf("--since=%ds", since)); err != nil || out != late {
		t.Fatalf("--since=%ds: %v %q, want only the late lines", since, err, out)
	}
	sinceTime := boundary.UTC().Format(time.RFC3339)
	if out, err := podLogs(t, kubectl, n, "--since-time="+sinceTime); err != nil || out != late {
		t.Fatalf("--since-time=%s: %v %q, want only the late lines", sinceTime, err, out)
	}
	if out, err := podLogs(t, kubectl, n, "--since-time="+sinceTime, "--tail=1", "--timestamps"); err != nil || !strings.HasSuffix(out, " late-2\n") || strings.Count(out, "\n") != 1 {
		t.Fatalf("--since-time with --tail=1 --timestamps: %v %q", err, out)
	}
	// A time after every line returns none.
	future := time.Now().Add(time.Hour).UTC().Format(time.RFC3339)
	if out, err := podLogs(t, kubectl, n, "--since-time="+future); err != nil || out != "" {
		t.Fatalf("--since-time in the future: %v %q, want nothing", err, out)
	}
}

// logsFollow: kubectl logs -f streams lines as the container writes them, with their times
// when asked, and keeps the stream open while it runs.
func logsFollow(t *testing.T, kubectl string, n *node, local int) {
	out := followWhileSaying(t, kubectlCmd(t, kubectl, n, "logs", "-f", "--tail=0", "--timestamps", "debug"), local, "followed", " followed\n")
	first, _, _ := strings.Cut(out, "\n")
	stamp, line, _ := strings.Cut(first, " ")
	if _, err := time.Parse(time.RFC3339Nano, stamp); err != nil || line != "followed" {
		t.Fatalf("logs -f --timestamps: first line %q, want a time and followed", first)
	}
}

// followWhileSaying starts a streaming kubectl (logs -f, attach) and has the debug pod say
// line until want shows in its output, which it returns: a stream starts at the output's end
// once it is open, so one line said too early is not enough.
func followWhileSaying(t *testing.T, cmd *exec.Cmd, local int, line, want string) string {
	t.Helper()
	var out liveOutput
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() { _ = cmd.Process.Kill(); _ = cmd.Wait() }()
	testutil.Eventually(t, 20*time.Second, 200*time.Millisecond, func() error {
		say(t, local, line)
		if !strings.Contains(out.String(), want) {
			return fmt.Errorf("%s output: %q", cmd.Args[1], out.String())
		}
		return nil
	})
	return out.String()
}

package main

import (
	"fmt"
	"io"
	"net/http"
	"os/exec"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/skiff-sh/skiff/testkit/testutil"
)

// upOn starts `skiff up` (control plane only, plain HTTP) on dir and waits until it serves.
func upOn(t *testing.T, bin, name, dir string) (*proc, string) {
	t.Helper()
	addr := "127.0.0.1:" + strconv.Itoa(freePort(t))
	p := startProc(t, name, bin, "up", "--agent=false", "--api-auth=false", "--nats-port", "-1", "--listen", addr, "--data-dir", dir)
	base := "http://" + addr
	testutil.Eventually(t, 60*time.Second, 50*time.Millisecond, func() error {
		if !strings.Contains(p.stderr.String(), "skiff is up in") {
			return fmt.Errorf("%s not up yet", name)
		}
		// Once up, it tells a new user what to run next.
		if !strings.Contains(p.stderr.String(), "skiff apply -f deploy/examples/web.yaml\n  skiff get pods\n  skiff trace deploy/web") {
			return fmt.Errorf("%s up, but the next commands are not printed yet:\n%s", name, p.stderr.String())
		}
		return nil
	})
	return p, base
}

func httpDo(method, url, body string) (int, string, error) {
	req, err := http.NewRequest(method, url, strings.NewReader(body))
	if err != nil {
		return 0, "", err
	}
	req.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return 0, "", err
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b), nil
}

// A second `skiff up` on a data dir in use exits non-zero naming the holder, and the first
// keeps serving what it stored; the lock dies with its process, so a restart after a crash
// starts on the same store.
func TestSecondUpOnOneDataDirRefuses(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the skiff binary")
	}
	bin := testutil.BuildBinary(t, "./services/skiff")
	dir := t.TempDir()
	first, base := upOn(t, bin, "first", dir)
	const cm = `{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"kept"},"data":{"k":"v"}}`
	if code, out, err := httpDo("POST", base+"/api/v1/namespaces/default/configmaps", cm); err != nil || code != http.StatusCreated {
		t.Fatalf("create: %d %s %v", code, out, err)
	}

	second := exec.Command(bin, "up", "--agent=false", "--api-auth=false", "--nats-port", "-1",
		"--listen", "127.0.0.1:"+strconv.Itoa(freePort(t)), "--data-dir", dir)
	done := make(chan struct{})
	var out []byte
	var err error
	go func() { out, err = second.CombinedOutput(); close(done) }()
	select {
	case <-done:
	case <-time.After(60 * time.Second):
		_ = second.Process.Kill()
		<-done
		t.Fatalf("the second skiff up did not exit: %s", out)
	}
	want := fmt.Sprintf("skiff.lock is locked by the process with pid=%d started=", first.cmd.Process.Pid)
	if err == nil || !strings.Contains(string(out), want) {
		t.Fatalf("second skiff up: err %v, output %q; want a failure containing %q", err, out, want)
	}
	if strings.Contains(string(out), "skiff is up") {
		t.Errorf("the second process came up: %s", out)
	}

	get := func(base string) error {
		code, body, err := httpDo("GET", base+"/api/v1/namespaces/default/configmaps/kept", "")
		if err != nil || code != http.StatusOK || !strings.Contains(body, `"k":"v"`) {
			return fmt.Errorf("get kept: %d %s %v", code, body, err)
		}
		return nil
	}
	if err := get(base); err != nil {
		t.Fatalf("the first process after the refused start: %v", err)
	}
	first.kill() // SIGKILL: the lock file stays, the lock does not
	_, base = upOn(t, bin, "third", dir)
	if err := get(base); err != nil {
		t.Fatalf("after a restart on the dir: %v", err)
	}
}

// `skiff nats` holds its store the same way: a second server on the dir exits naming the first.
func TestSecondNATSOnOneDataDirRefuses(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the skiff binary")
	}
	bin := testutil.BuildBinary(t, "./services/skiff")
	dir := t.TempDir()
	args := func(addr string) []string {
		return []string{"nats", "--name", "n1", "--listen", addr, "--data-dir", dir}
	}
	addr := "127.0.0.1:" + strconv.Itoa(freePort(t))
	first := startProc(t, "first", bin, args(addr)...)
	testutil.Eventually(t, 30*time.Second, 50*time.Millisecond, func() error {
		if !strings.Contains(first.stderr.String(), "skiff nats n1 is up") {
			return fmt.Errorf("first nats not up yet")
		}
		return nil
	})
	out, err := exec.Command(bin, args("127.0.0.1:"+strconv.Itoa(freePort(t)))...).CombinedOutput()
	want := fmt.Sprintf("is locked by the process with pid=%d started=", first.cmd.Process.Pid)
	if err == nil || !strings.Contains(string(out), want) {
		t.Fatalf("second skiff nats: err %v, output %q; want a failure containing %q", err, out, want)
	}
	nc, err := nats.Connect("nats://" + addr)
	if err != nil {
		t.Fatalf("the first server after the refused start: %v", err)
	}
	defer nc.Close()
	if _, err := nc.RTT(); err != nil {
		t.Fatalf("the first server after the refused start: %v", err)
	}
}

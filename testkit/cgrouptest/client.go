package cgrouptest

import (
	"bufio"
	"encoding/json"
	"fmt"
	"github.com/skiff-sh/skiff/testkit/needs"
	"io"
	"os"
	"os/exec"
	"syscall"
	"testing"
)

// IsClient reports whether this process is a client started by StartClient with env; TestMain
// then runs Serve instead of the tests.
func IsClient(env string) bool { return os.Getenv(env) == "1" }

// Serve answers one JSON request per line of in with one JSON response on out until in ends.
// bad makes the response to a line that is not a request.
func Serve[Req, Resp any](in io.Reader, out io.Writer, handle func(Req) Resp, bad func(error) Resp) {
	enc := json.NewEncoder(out)
	sc := bufio.NewScanner(in)
	for sc.Scan() {
		var req Req
		if err := json.Unmarshal(sc.Bytes(), &req); err != nil {
			_ = enc.Encode(bad(err))
			continue
		}
		_ = enc.Encode(handle(req))
	}
}

// Client is the test's handle on a client process.
type Client[Req, Resp any] struct {
	t   testing.TB
	enc *json.Encoder
	dec *json.Decoder
	// Netns is the client's network namespace, /proc/<pid>/ns/net.
	Netns string
}

// StartClient re-executes the test binary with env=1 inside cgroup, and in a network namespace
// of its own if newNetns. The client exits (and is waited for) when the test ends.
func StartClient[Req, Resp any](t testing.TB, cgroup, env string, newNetns bool) *Client[Req, Resp] {
	t.Helper()
	dir, err := os.Open(cgroup)
	if err != nil {
		t.Fatal(err)
	}
	defer dir.Close()
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), env+"=1")
	cmd.Stderr = os.Stderr
	cmd.SysProcAttr = &syscall.SysProcAttr{UseCgroupFD: true, CgroupFD: int(dir.Fd())}
	where := "a cgroup2 child"
	if newNetns {
		cmd.SysProcAttr.Cloneflags = syscall.CLONE_NEWNET
		where += " and a new netns"
	}
	stdin, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		needs.Skipf(t, "cannot start a process in %s: %v", where, err)
	}
	t.Cleanup(func() {
		stdin.Close() // the client exits at EOF
		if err := cmd.Wait(); err != nil {
			t.Errorf("client: %v", err)
		}
	})
	return &Client[Req, Resp]{
		t: t, enc: json.NewEncoder(stdin), dec: json.NewDecoder(stdout),
		Netns: fmt.Sprintf("/proc/%d/ns/net", cmd.Process.Pid),
	}
}

// Do sends one request and returns the client's response; a broken pipe fails the test.
func (c *Client[Req, Resp]) Do(req Req) Resp {
	c.t.Helper()
	if err := c.enc.Encode(req); err != nil {
		c.t.Fatalf("client: %v", err)
	}
	var r Resp
	if err := c.dec.Decode(&r); err != nil {
		c.t.Fatalf("client: %v", err)
	}
	return r
}

package main

import (
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/skiff-sh/skiff/actors/agent"
	"github.com/skiff-sh/skiff/testkit/needs"
	"github.com/skiff-sh/skiff/testkit/testutil"
)

// runc is the one node part skiff does not carry: without it a root `skiff up` names the
// command that installs it and still serves the control plane.
func TestUpWithoutRuncSaysHowToInstallItAndServes(t *testing.T) {
	if why := agent.Supported(); why != "" {
		needs.Skip(t, why)
	}
	bin := testutil.BuildBinary(t, "./services/skiff")
	t.Setenv("PATH", pathWithout(t, "runc"))
	addr := "127.0.0.1:" + strconv.Itoa(freePort(t))
	p := startProc(t, "up", bin, "up", "--api-auth=false", "--nats-port", "-1", "--listen", addr, "--data-dir", t.TempDir())
	testutil.Eventually(t, 60*time.Second, 50*time.Millisecond, func() error {
		out := p.stderr.String()
		if !strings.Contains(out, "skiff is up in") {
			return fmt.Errorf("not up yet:\n%s", out)
		}
		if !strings.Contains(out, "running without a node agent: runc is not installed") || !strings.Contains(out, runcInstall) {
			return fmt.Errorf("up without runc, but it does not say how to install it:\n%s", out)
		}
		return nil
	})
	resp, err := http.Get("http://" + addr + "/api/v1/namespaces/default")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("the control plane without a node: GET namespace default = %d", resp.StatusCode)
	}
}

// pathWithout is a PATH of one directory linking every command of this PATH but name.
func pathWithout(t *testing.T, name string) string {
	dir := t.TempDir()
	for _, d := range filepath.SplitList(os.Getenv("PATH")) {
		entries, _ := os.ReadDir(d)
		for _, e := range entries {
			if e.Name() == name {
				continue
			}
			_ = os.Symlink(filepath.Join(d, e.Name()), filepath.Join(dir, e.Name())) // the first on PATH wins
		}
	}
	return dir
}

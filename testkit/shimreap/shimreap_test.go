package shimreap

import (
	"errors"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"syscall"
	"testing"
	"time"
)

// A fake shim is this test binary, copied under a shim's name and asked to sleep.
const fakeShimEnv = "SHIMREAP_FAKE_SHIM"

func TestMain(m *testing.M) {
	if os.Getenv(fakeShimEnv) != "" {
		time.Sleep(time.Minute)
		os.Exit(0)
	}
	os.Exit(m.Run())
}

// TestKillUnderKillsOnlyShimsUnderDir: shims of a containerd under the directory die; a shim
// of a socket elsewhere, even one whose path only starts with the same characters, lives.
func TestKillUnderKillsOnlyShimsUnderDir(t *testing.T) {
	base := t.TempDir()
	dir := filepath.Join(base, "node")
	fake := filepath.Join(base, "containerd-shim-runc-v2")
	copyExecutable(t, fake)
	start := func(socket string) *exec.Cmd {
		cmd := exec.Command(fake, "-namespace", "skiff", "-id", "pod-c-0", "-address", socket)
		cmd.Env = append(os.Environ(), fakeShimEnv+"=1")
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = cmd.Process.Kill(); _, _ = cmd.Process.Wait() })
		return cmd
	}
	inside := start(filepath.Join(dir, "containerd", "containerd.sock"))
	sibling := start(filepath.Join(base, "node2", "containerd.sock")) // same characters, another dir
	exact := start(filepath.Join(base, "exact.sock"))

	if got := PIDs(filepath.Join(base, "exact.sock")); !slices.Equal(got, []int{exact.Process.Pid}) {
		t.Fatalf("PIDs of exact.sock: %v, want [%d]", got, exact.Process.Pid)
	}
	KillUnder(dir)
	if err := inside.Wait(); !killed(err) {
		t.Fatalf("the shim under %s: %v, want killed", dir, err)
	}
	for name, cmd := range map[string]*exec.Cmd{"sibling": sibling, "exact": exact} {
		if err := cmd.Process.Signal(syscall.Signal(0)); err != nil {
			t.Errorf("the %s shim was killed too: %v", name, err)
		}
	}
	Kill(filepath.Join(base, "exact.sock"))
	if err := exact.Wait(); !killed(err) {
		t.Fatalf("the exact.sock shim: %v, want killed", err)
	}
}

func killed(err error) bool {
	var ee *exec.ExitError
	if !errors.As(err, &ee) {
		return false
	}
	ws, ok := ee.Sys().(syscall.WaitStatus)
	return ok && ws.Signaled() && ws.Signal() == syscall.SIGKILL
}

func copyExecutable(t *testing.T, to string) {
	t.Helper()
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	src, err := os.Open(self)
	if err != nil {
		t.Fatal(err)
	}
	defer src.Close()
	dst, err := os.OpenFile(to, os.O_CREATE|os.O_WRONLY, 0o755)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := io.Copy(dst, src); err != nil {
		t.Fatal(err)
	}
	if err := dst.Close(); err != nil {
		t.Fatal(err)
	}
}

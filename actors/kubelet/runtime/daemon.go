package runtime

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	containerd "github.com/containerd/containerd/v2/client"
)

// Daemon is a containerd process this package started, with its own
// socket, root and state under one directory.
type Daemon struct {
	Socket  string
	Root    string
	LogPath string
	Adopted bool // it was already serving (a restarted agent): Stop leaves it running

	cmd  *exec.Cmd
	done chan struct{} // closed when the process exits
	err  error         // exit error, valid after done
}

// The CRI plugin and snapshotters that need extra kernel or host support are
// off: Skiff drives containerd through its Go client, not CRI.
const daemonConfig = `version = 3
root = %q
state = %q
disabled_plugins = [
  "io.containerd.grpc.v1.cri",
  "io.containerd.cri.v1.images",
  "io.containerd.cri.v1.runtime",
  "io.containerd.podsandbox.controller.v1.podsandbox",
  "io.containerd.snapshotter.v1.btrfs",
  "io.containerd.snapshotter.v1.zfs",
  "io.containerd.snapshotter.v1.devmapper",
  "io.containerd.snapshotter.v1.aufs",
  "io.containerd.nri.v1.nri",
]

[grpc]
  address = %q

[ttrpc]
  address = %q
`

// StartContainerd runs the containerd binary found in PATH with a config
// generated under root and returns once it answers on its socket.
func StartContainerd(ctx context.Context, root string) (*Daemon, error) {
	bin, err := exec.LookPath("containerd")
	if err != nil {
		return nil, fmt.Errorf("containerd binary: %w", err)
	}
	root, err = filepath.Abs(root)
	if err != nil {
		return nil, err
	}
	dir := filepath.Join(root, "containerd")
	if err := os.MkdirAll(dir, 0o711); err != nil {
		return nil, err
	}
	d := &Daemon{
		Socket:  filepath.Join(dir, "containerd.sock"),
		Root:    dir,
		LogPath: filepath.Join(dir, "containerd.log"),
		done:    make(chan struct{}),
	}
	// A unix socket path is limited to 108 bytes.
	if len(d.Socket)+len(".ttrpc") >= 108 {
		return nil, fmt.Errorf("containerd socket path %q is too long; use a shorter root", d.Socket)
	}
	// The daemon outlives the agent that started it: a restarted agent
	// finds it serving and uses it rather than starting a second one.
	if serving(ctx, d.Socket) {
		d.Adopted = true
		close(d.done)
		return d, nil
	}
	_ = os.Remove(d.Socket) // stale socket of a daemon that died
	cfg := fmt.Sprintf(daemonConfig, filepath.Join(dir, "root"), filepath.Join(dir, "state"), d.Socket, d.Socket+".ttrpc")
	cfgPath := filepath.Join(dir, "config.toml")
	if err := os.WriteFile(cfgPath, []byte(cfg), 0o600); err != nil {
		return nil, err
	}
	logf, err := os.OpenFile(d.LogPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o600)
	if err != nil {
		return nil, err
	}
	d.cmd = exec.Command(bin, "--config", cfgPath)
	d.cmd.Stdout, d.cmd.Stderr = logf, logf
	// Own process group: a terminal's ^C must not reach the daemon directly.
	d.cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := d.cmd.Start(); err != nil {
		logf.Close()
		return nil, err
	}
	go func() {
		d.err = d.cmd.Wait()
		logf.Close()
		close(d.done)
	}()
	if err := d.waitServing(ctx, 30*time.Second); err != nil {
		_ = d.Stop()
		return nil, err
	}
	return d, nil
}

func (d *Daemon) waitServing(ctx context.Context, timeout time.Duration) error {
	deadline := time.Now().Add(timeout)
	for {
		select {
		case <-d.done:
			return fmt.Errorf("containerd exited: %v; log:\n%s", d.err, tail(d.LogPath, 20))
		default:
		}
		if serving(ctx, d.Socket) {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("containerd did not serve on %s within %s; log:\n%s", d.Socket, timeout, tail(d.LogPath, 20))
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(50 * time.Millisecond):
		}
	}
}

func serving(ctx context.Context, socket string) bool {
	if _, err := os.Stat(socket); err != nil {
		return false
	}
	c, err := containerd.New(socket, containerd.WithTimeout(2*time.Second))
	if err != nil {
		return false
	}
	defer c.Close()
	ok, err := c.IsServing(ctx)
	return ok && err == nil
}

// Stop ends the daemon (SIGTERM, then SIGKILL after 10 s). Shims and the
// containers they run keep running, as they do when containerd restarts.
func (d *Daemon) Stop() error {
	if d.Adopted {
		return nil
	}
	select {
	case <-d.done:
		return nil
	default:
	}
	_ = d.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-d.done:
	case <-time.After(10 * time.Second):
		_ = d.cmd.Process.Kill()
		<-d.done
	}
	var ee *exec.ExitError
	if d.err != nil && !errors.As(d.err, &ee) {
		return d.err
	}
	return nil
}

func tail(path string, n int) string {
	b, err := os.ReadFile(path)
	if err != nil {
		return err.Error()
	}
	lines := strings.Split(strings.TrimRight(string(b), "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}

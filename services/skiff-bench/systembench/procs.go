package systembench

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/skiff-sh/skiff/services/skiff-bench/benchutil"
)

// buildBinaries builds skiff and kubectl from the module the bench runs in into dir: the
// binaries users run, from this tree.
func buildBinaries(ctx context.Context, dir string) (skiff, kubectl string, err error) {
	root, err := benchutil.ModuleRoot(ctx)
	if err != nil {
		return "", "", err
	}
	cmd := exec.CommandContext(ctx, "go", "build", "-o", dir+string(filepath.Separator), "./services/skiff", "./services/kubectl")
	cmd.Dir = root
	if out, err := cmd.CombinedOutput(); err != nil {
		return "", "", fmt.Errorf("go build: %w\n%s", err, out)
	}
	return filepath.Join(dir, "skiff"), filepath.Join(dir, "kubectl"), nil
}

// proc is a child process whose output goes to a log file (shown when it fails).
type proc struct {
	name string
	cmd  *exec.Cmd
	log  string
	done chan struct{}
	err  error // valid once done is closed
}

func startProc(dir, name, bin string, args ...string) (*proc, error) {
	logPath := filepath.Join(dir, name+".log")
	f, err := os.Create(logPath)
	if err != nil {
		return nil, err
	}
	cmd := exec.Command(bin, args...)
	cmd.Stdout, cmd.Stderr = f, f
	// Its own process group, so a Ctrl-C reaches the bench only and teardown runs in order;
	// killed with the bench if the bench dies without tearing down.
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		f.Close()
		return nil, fmt.Errorf("start %s: %w", name, err)
	}
	p := &proc{name: name, cmd: cmd, log: logPath, done: make(chan struct{})}
	go func() {
		p.err = cmd.Wait()
		f.Close()
		close(p.done)
	}()
	return p, nil
}

func (p *proc) pid() int { return p.cmd.Process.Pid }

// exited is an error describing the process's end if it has ended, else nil.
func (p *proc) exited() error {
	select {
	case <-p.done:
		return fmt.Errorf("%s exited (%v); last output:\n%s", p.name, p.err, p.tail(20))
	default:
		return nil
	}
}

// stop ends the process gracefully (SIGTERM), or kills it after grace.
func (p *proc) stop(grace time.Duration) {
	_ = p.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-p.done:
	case <-time.After(grace):
		_ = p.cmd.Process.Kill()
		<-p.done
	}
}

// tail is the last n lines of the process's output.
func (p *proc) tail(n int) string {
	data, _ := os.ReadFile(p.log)
	lines := strings.Split(strings.TrimRight(string(data), "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}

// memory is a process's resident set from /proc/<pid>/status, in bytes: peak (VmHWM) and now
// (VmRSS).
type memory struct{ peak, now uint64 }

func readMemory(pid int) (memory, error) {
	data, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return memory{}, err
	}
	var m memory
	sc := bufio.NewScanner(bytes.NewReader(data))
	for sc.Scan() {
		key, val, ok := strings.Cut(sc.Text(), ":")
		if !ok || (key != "VmHWM" && key != "VmRSS") {
			continue
		}
		kb, err := strconv.ParseUint(strings.TrimSuffix(strings.TrimSpace(val), " kB"), 10, 64)
		if err != nil {
			return memory{}, fmt.Errorf("/proc/%d/status %s: %w", pid, key, err)
		}
		if key == "VmHWM" {
			m.peak = kb << 10
		} else {
			m.now = kb << 10
		}
	}
	return m, nil
}

// runKubectl runs one kubectl command against the cluster and returns its output.
func runKubectl(ctx context.Context, kubectl, kubeconfig, cacheDir string, args ...string) (string, error) {
	args = append([]string{"--kubeconfig", kubeconfig, "--cache-dir", cacheDir}, args...)
	out, err := exec.CommandContext(ctx, kubectl, args...).CombinedOutput()
	if err != nil {
		return "", fmt.Errorf("kubectl %s: %w\n%s", strings.Join(args[4:], " "), err, out)
	}
	return strings.TrimSpace(string(out)), nil
}

// cpuTime is the CPU time (user + system) a process has used, from /proc/<pid>/stat.
func cpuTime(pid int) (time.Duration, error) {
	data, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0, err
	}
	// Fields after the command name (which may hold spaces) start at field 3; utime and stime
	// are fields 14 and 15, in clock ticks of the /proc ABI (USER_HZ, 100 a second).
	end := bytes.LastIndexByte(data, ')')
	fields := strings.Fields(string(data[end+1:]))
	if end < 0 || len(fields) < 13 {
		return 0, fmt.Errorf("/proc/%d/stat: unexpected format", pid)
	}
	var ticks uint64
	for _, f := range fields[11:13] {
		n, err := strconv.ParseUint(f, 10, 64)
		if err != nil {
			return 0, fmt.Errorf("/proc/%d/stat: %w", pid, err)
		}
		ticks += n
	}
	return time.Duration(ticks) * time.Second / 100, nil
}

package dnsbench

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"

	"golang.org/x/sys/unix"

	"github.com/skiff-sh/skiff/services/skiff-bench/benchutil"
)

// corednsVersion is the CoreDNS the comparison runs, as corednsbuild/go.mod requires it.
const corednsVersion = "v1.15.0"

// child is a process the bench started, its output in a log file beside the data.
type child struct {
	cmd *exec.Cmd
	log string
}

func spawn(dir, name, bin string, args ...string) (*child, error) {
	return spawnEnv(dir, name, bin, nil, args...)
}

// spawnEnv is spawn with env added to the bench's environment.
func spawnEnv(dir, name, bin string, env []string, args ...string) (*child, error) {
	if err := evict(bin); err != nil {
		return nil, err
	}
	c := &child{cmd: exec.Command(bin, args...), log: filepath.Join(dir, name+".log")}
	f, err := os.Create(c.log)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	c.cmd.Stdout, c.cmd.Stderr = f, f
	// Each Go runtime logs its collections, whose live heap liveHeap reads.
	c.cmd.Env = append(append(os.Environ(), "GODEBUG=gctrace=1"), env...)
	// Killed with the bench if the bench dies first.
	c.cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if err := c.cmd.Start(); err != nil {
		return nil, fmt.Errorf("start %s: %w", name, err)
	}
	return c, nil
}

func (c *child) stop() {
	_ = c.cmd.Process.Signal(syscall.SIGTERM)
	done := make(chan struct{})
	go func() { _ = c.cmd.Wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		_ = c.cmd.Process.Kill()
		<-done
	}
}

// waitLog waits for a line of the log that contains marker and returns what follows it.
func (c *child) waitLog(ctx context.Context, marker string, limit time.Duration) (string, error) {
	deadline := time.Now().Add(limit)
	for time.Now().Before(deadline) && ctx.Err() == nil {
		f, err := os.Open(c.log)
		if err != nil {
			return "", err
		}
		sc := bufio.NewScanner(f)
		for sc.Scan() {
			if _, rest, ok := strings.Cut(sc.Text(), marker); ok {
				f.Close()
				return strings.TrimSpace(rest), nil
			}
		}
		f.Close()
		time.Sleep(50 * time.Millisecond)
	}
	data, _ := os.ReadFile(c.log)
	return "", fmt.Errorf("no %q in %s's output within %v:\n%s", marker, filepath.Base(c.log), limit, lastLines(string(data), 20))
}

func lastLines(s string, n int) string {
	l := strings.Split(strings.TrimRight(s, "\n"), "\n")
	return strings.Join(l[max(0, len(l)-n):], "\n")
}

// rss is a process's resident set now (VmRSS) and its anonymous part (RssAnon: heap, stacks,
// runtime; the rest is the executable's and libraries' file pages), in bytes.
func rss(pid int) (all, anon uint64, err error) {
	data, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/status")
	if err != nil {
		return 0, 0, err
	}
	var found int
	for _, line := range strings.Split(string(data), "\n") {
		for field, dst := range map[string]*uint64{"VmRSS:": &all, "RssAnon:": &anon} {
			if v, ok := strings.CutPrefix(line, field); ok {
				kb, err := strconv.ParseUint(strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(v), "kB")), 10, 64)
				if err != nil {
					return 0, 0, fmt.Errorf("/proc/%d/status %s %w", pid, field, err)
				}
				*dst, found = kb<<10, found+1
			}
		}
	}
	if found != 2 {
		return 0, 0, errors.New("no VmRSS or RssAnon in /proc/" + strconv.Itoa(pid) + "/status")
	}
	return all, anon, nil
}

// gcLine is a gctrace line's heap sizes: at the start, at the end and live after marking.
var gcLine = regexp.MustCompile(`, (\d+)->(\d+)->(\d+) MB,`)

// liveHeap is the heap the child's last collection found live (GODEBUG=gctrace=1), in MiB.
func (c *child) liveHeap() (int, error) {
	data, err := os.ReadFile(c.log)
	if err != nil {
		return 0, err
	}
	m := gcLine.FindAllSubmatch(data, -1)
	if len(m) == 0 {
		return 0, errors.New("no gctrace line in " + filepath.Base(c.log))
	}
	return strconv.Atoi(string(m[len(m)-1][3]))
}

// evict drops bin's pages from the page cache (those no process maps), so a process started
// from it maps only the pages its own run reads, as after a boot. Without it a binary's RSS
// depends on its file's history: one just written by the Go linker sits in the page cache in
// 2 MiB folios, and a read of any byte maps the whole folio (at 1,000 Services skiff dns had
// 10 MiB of such PMD mappings and 13 MiB more file pages than from a cold copy of itself).
func evict(bin string) error {
	f, err := os.Open(bin)
	if err != nil {
		return err
	}
	defer f.Close()
	if err := unix.Fadvise(int(f.Fd()), 0, 0, unix.FADV_DONTNEED); err != nil {
		return fmt.Errorf("evict %s from the page cache: %w", bin, err)
	}
	return nil
}

// copyBin copies the binary src to dst (mode 0755).
func copyBin(src, dst string) error {
	in, err := os.Open(src)
	if err != nil {
		return err
	}
	defer in.Close()
	out, err := os.OpenFile(dst, os.O_CREATE|os.O_WRONLY|os.O_TRUNC, 0o755)
	if err != nil {
		return err
	}
	if _, err := io.Copy(out, in); err != nil {
		out.Close()
		return err
	}
	return out.Close()
}

// buildBins builds skiff from this tree and CoreDNS from the corednsbuild module (into the
// cache, once per version). The servers under test run from copies in dir written the same
// way: skiff dns then shares no page-cache pages with the control plane's skiff, and neither
// binary's file pages depend on how or when it was built (each is evicted before it starts).
func buildBins(ctx context.Context, dir string) (skiff, dnsBin, coredns string, err error) {
	root, err := benchutil.ModuleRoot(ctx)
	if err != nil {
		return "", "", "", err
	}
	skiff = filepath.Join(dir, "skiff")
	cmd := exec.CommandContext(ctx, "go", "build", "-o", skiff, "./services/skiff")
	cmd.Dir = root
	if out, err := cmd.CombinedOutput(); err != nil {
		return "", "", "", fmt.Errorf("build skiff: %w\n%s", err, out)
	}
	bins, err := benchutil.BuildFromModule(ctx, filepath.Join("services", "skiff-bench", "dnsbench", "corednsbuild"),
		"coredns-"+corednsVersion, map[string]string{"coredns": "github.com/coredns/coredns"})
	if err != nil {
		return "", "", "", err
	}
	dnsBin, coredns = filepath.Join(dir, "skiff-dns"), filepath.Join(dir, "coredns")
	if err := copyBin(skiff, dnsBin); err != nil {
		return "", "", "", err
	}
	if err := copyBin(bins["coredns"], coredns); err != nil {
		return "", "", "", err
	}
	return skiff, dnsBin, coredns, nil
}

// startSkiffDNS runs `skiff dns` (with extra flags and env, from the binary dnsBin) joined to the control plane's NATS with a
// node's credentials minted from data's keys; it returns once the server has synced and
// listens, or, with --no-server, once its informers have synced (the address is then "").
func startSkiffDNS(ctx context.Context, dir, data, skiff, dnsBin string, natsPort int, env []string, extra ...string) (*child, string, error) {
	creds, err := exec.CommandContext(ctx, skiff, "nats-creds", "--node", "bench-dns", "--data-dir", data).Output()
	if err != nil {
		return nil, "", fmt.Errorf("skiff nats-creds: %w", err)
	}
	credsFile := filepath.Join(dir, "bench-dns.creds")
	if err := os.WriteFile(credsFile, creds, 0o600); err != nil {
		return nil, "", err
	}
	args := append([]string{"dns", "--listen", "127.0.0.1:0", "--node-name", "bench-dns", "--nats-creds", credsFile,
		"--nats-url", "nats://127.0.0.1:" + strconv.Itoa(natsPort), "--upstream", "127.0.0.1:9"}, extra...)
	c, err := spawnEnv(dir, "skiff-dns", dnsBin, env, args...)
	if err != nil {
		return nil, "", err
	}
	marker := "skiff dns serving on "
	if slices.Contains(extra, "--no-server") {
		marker = "skiff dns informers synced, not serving"
	}
	addr, err := c.waitLog(ctx, marker, 2*time.Minute)
	if err != nil {
		c.stop()
		return nil, "", err
	}
	return c, addr, nil
}

// corefile is CoreDNS's configuration: the kubernetes plugin as kubeadm configures it (pods
// insecure, reverse zones), reading Skiff's API through its kubeconfig. No cache plugin: both
// servers then answer every query from their Service index, and an endpoint change is seen as
// soon as the server has it.
const corefile = `.:%d {
    bind 127.0.0.1
    errors
    kubernetes cluster.local in-addr.arpa ip6.arpa {
        kubeconfig %s
        pods insecure
        fallthrough in-addr.arpa ip6.arpa
        ttl 5
    }
    loadbalance
}
`

// startCoreDNS runs CoreDNS against Skiff's API (env added to its environment); it returns once
// CoreDNS answers for probeName (its informers have the Services).
func startCoreDNS(ctx context.Context, dir, bin, kubeconfig, probeName string, env ...string) (*child, string, error) {
	port, err := benchutil.FreePort()
	if err != nil {
		return nil, "", err
	}
	conf := filepath.Join(dir, "Corefile")
	if err := os.WriteFile(conf, []byte(fmt.Sprintf(corefile, port, kubeconfig)), 0o644); err != nil {
		return nil, "", err
	}
	c, err := spawnEnv(dir, "coredns", bin, env, "-conf", conf)
	if err != nil {
		return nil, "", err
	}
	addr := "127.0.0.1:" + strconv.Itoa(port)
	for deadline := time.Now().Add(2 * time.Minute); time.Now().Before(deadline); time.Sleep(100 * time.Millisecond) {
		if len(addrs(addr, probeName)) > 0 {
			return c, addr, nil
		}
	}
	data, _ := os.ReadFile(c.log)
	c.stop()
	return nil, "", fmt.Errorf("coredns did not answer %s in 2 min:\n%s", probeName, lastLines(string(data), 20))
}

// Package runtime is the node agent's container layer: pod sandboxes (a
// network namespace wired by CNI, plus shared hosts/hostname/resolv.conf
// files) and containers run by containerd v2 and runc. All state lives in
// containerd labels and files under Options.Root, so a restarted agent finds
// and adopts what is running (List).
package runtime

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"sync"

	"github.com/containerd/cgroups/v3"
	containerd "github.com/containerd/containerd/v2/client"
	"github.com/containerd/containerd/v2/pkg/namespaces"
	gocni "github.com/containerd/go-cni"
)

// Options configure a Runtime. Zero values get the defaults listed.
type Options struct {
	Socket     string // containerd socket; empty: start containerd under Root (StartContainerd)
	Root       string // data dir for netns, pod files, logs, IPAM (required)
	Namespace  string // containerd namespace, default "skiff"
	CNIBinDir  string // default /opt/cni/bin
	CNIConfDir string // a dir with the operator's *.conflist; empty: one is generated from PodCIDR/Bridge
	PodCIDR    string // default 10.88.0.0/16
	Bridge     string // default skiff0
	// RegistryConfigDir is a registry hosts directory in containerd's layout
	// (<dir>/<registry>/hosts.toml: mirrors, plain HTTP, CAs), so a node without the internet
	// pulls from a mirror; empty: each registry as named (localhost over plain HTTP).
	RegistryConfigDir string
	// NetworkReady, when set, is called with the pod's network namespace once CNI ADD has
	// wired it; an error fails the sandbox as a failed CNI ADD does (the network is torn
	// down and RunSandbox returns the error). The node agent attaches NetworkPolicy's
	// programs here, so no pod runs without them.
	NetworkReady func(ctx context.Context, netnsPath string) error
}

const (
	defaultNamespace = "skiff"
	defaultCNIBinDir = "/opt/cni/bin"
	defaultPodCIDR   = "10.88.0.0/16"
	defaultBridge    = "skiff0"
	snapshotter      = "overlayfs"
)

// Labels on containerd containers; List and adoption read them back.
const (
	labelRole      = "skiff.sh/role" // roleSandbox | roleContainer
	labelPodUID    = "skiff.sh/pod-uid"
	labelPodName   = "skiff.sh/pod-name"
	labelPodNS     = "skiff.sh/pod-namespace"
	labelHostname  = "skiff.sh/hostname"
	labelIP        = "skiff.sh/ip"
	labelNetNS     = "skiff.sh/netns"
	labelPorts     = "skiff.sh/ports"
	labelSandboxID = "skiff.sh/sandbox-id"
	labelName      = "skiff.sh/container-name"
	labelAttempt   = "skiff.sh/attempt"
	labelLogPath   = "skiff.sh/log-path"
	labelCgroup    = "skiff.sh/cgroup"
	labelStartedAt = "skiff.sh/started-at"
	labelOOM       = "skiff.sh/oom-killed"
	labelFinished  = "skiff.sh/finished" // on a sandbox: FinishSandbox ran
	labelStdin     = "skiff.sh/stdin"    // on a container with stdin: "open", or "once" for stdinOnce
	labelTTY       = "skiff.sh/tty"      // on a container with a terminal: "true"

	roleSandbox   = "sandbox"
	roleContainer = "container"
)

// Runtime runs pods on this node. It is safe for concurrent use.
type Runtime struct {
	o      Options
	client *containerd.Client
	daemon *Daemon // non-nil when New started containerd itself
	cni    gocni.CNI
	// cniMu serialises CNI calls. go-cni's race-build mutex (go-deadlock) takes concurrent
	// read locks from two goroutines for recursion and exits the process; CNI calls are
	// short, so one at a time costs little.
	cniMu    sync.Mutex
	cgroupV2 bool
	locks    keyedMutex
	// stdins hold the write end of each stdin container's FIFO, by container id.
	stdinMu sync.Mutex
	stdins  map[string]*stdinPipe
	// logCopies are the copies of containers' output into their logs, by container id.
	logMu     sync.Mutex
	logCopies map[string]*logCopy
}

// New connects to containerd (starting it when Options.Socket is empty) and
// loads the CNI configuration.
func New(ctx context.Context, o Options) (*Runtime, error) {
	if o.Root == "" {
		return nil, errors.New("runtime: Options.Root is required")
	}
	root, err := filepath.Abs(o.Root)
	if err != nil {
		return nil, err
	}
	o.Root = root
	if o.Namespace == "" {
		o.Namespace = defaultNamespace
	}
	if o.CNIBinDir == "" {
		o.CNIBinDir = defaultCNIBinDir
	}
	if o.PodCIDR == "" {
		o.PodCIDR = defaultPodCIDR
	}
	if o.Bridge == "" {
		o.Bridge = defaultBridge
	}
	for _, d := range []string{o.Root, filepath.Join(o.Root, "netns"), filepath.Join(o.Root, "pods")} {
		if err := os.MkdirAll(d, 0o711); err != nil {
			return nil, err
		}
	}
	r := &Runtime{o: o, cgroupV2: cgroups.Mode() == cgroups.Unified}
	if r.cni, err = newCNI(o); err != nil {
		return nil, err
	}
	if o.Socket == "" {
		if r.daemon, err = StartContainerd(ctx, o.Root); err != nil {
			return nil, err
		}
		r.o.Socket = r.daemon.Socket
	}
	r.client, err = containerd.New(r.o.Socket, containerd.WithDefaultNamespace(o.Namespace))
	if err != nil {
		r.stopDaemon()
		return nil, fmt.Errorf("connect containerd: %w", err)
	}
	if err := r.resumeLogs(ctx); err != nil {
		_ = r.Close()
		return nil, fmt.Errorf("resume container logs: %w", err)
	}
	return r, nil
}

// Close disconnects; a daemon started by New is stopped (its containers keep
// running in their shims). Their output waits in its FIFOs for the next runtime (New).
func (r *Runtime) Close() error {
	r.stopLogs()
	err := r.client.Close()
	r.stopDaemon()
	return err
}

func (r *Runtime) stopDaemon() {
	if r.daemon != nil {
		_ = r.daemon.Stop()
	}
}

// Client exposes the containerd client (for diagnostics and tests).
func (r *Runtime) Client() *containerd.Client { return r.client }

// Namespace is the containerd namespace this runtime owns.
func (r *Runtime) Namespace() string { return r.o.Namespace }

func (r *Runtime) ctx(ctx context.Context) context.Context {
	return namespaces.WithNamespace(ctx, r.o.Namespace)
}

// Pod files live under Root/pods/<uid>: shared hosts/hostname/resolv.conf
// and logs/<container>/<attempt>.log.
func (r *Runtime) podDir(podUID string) string {
	return filepath.Join(r.o.Root, "pods", safeName(podUID))
}

// Root is the runtime's data directory (Options.Root), which holds the pod directories.
func (r *Runtime) Root() string { return r.o.Root }

// PodDir is the directory of the pod's files; the agent keeps its volumes under it, and
// StopSandbox unmounts and removes all of it.
func (r *Runtime) PodDir(podUID string) string { return r.podDir(podUID) }

// LogPath is where the stdout+stderr of one container attempt are written.
func (r *Runtime) LogPath(podUID, container string, attempt int) string {
	return filepath.Join(r.podDir(podUID), "logs", container, strconv.Itoa(attempt)+".log")
}

func (r *Runtime) netnsPath(sandboxID string) string {
	return filepath.Join(r.o.Root, "netns", sandboxID)
}

// sandboxID and containerID are stable functions of the pod, so every call
// (and every agent restart) names the same containerd objects. The hash keeps
// arbitrary UIDs within containerd's identifier rules.
func sandboxID(podUID string) string { return "pod-" + shortHash(podUID) }

func containerID(podUID, name string, attempt int) string {
	n := name
	if len(n) > 40 {
		n = n[:40]
	}
	return fmt.Sprintf("%s-%s-%d", shortHash(podUID), n, attempt)
}

func shortHash(s string) string {
	h := sha256.Sum256([]byte(s))
	return hex.EncodeToString(h[:8])
}

// safeName keeps a UID usable as one path element.
func safeName(s string) string {
	if s == "" || s == "." || s == ".." || filepath.Base(s) != s {
		return shortHash(s)
	}
	return s
}

// keyedMutex serialises operations on one pod while others proceed.
type keyedMutex struct {
	mu sync.Mutex
	m  map[string]*keyedEntry
}

type keyedEntry struct {
	mu   sync.Mutex
	refs int
}

func (k *keyedMutex) lock(key string) func() {
	k.mu.Lock()
	if k.m == nil {
		k.m = map[string]*keyedEntry{}
	}
	e := k.m[key]
	if e == nil {
		e = &keyedEntry{}
		k.m[key] = e
	}
	e.refs++
	k.mu.Unlock()
	e.mu.Lock()
	return func() {
		e.mu.Unlock()
		k.mu.Lock()
		if e.refs--; e.refs == 0 {
			delete(k.m, key)
		}
		k.mu.Unlock()
	}
}

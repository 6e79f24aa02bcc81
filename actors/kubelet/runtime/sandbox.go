package runtime

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/containerd/containerd/v2/pkg/oci"
	"github.com/containerd/errdefs"
	gocni "github.com/containerd/go-cni"
	specs "github.com/opencontainers/runtime-spec/specs-go"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/trace"

	containerd "github.com/containerd/containerd/v2/client"

	"github.com/skiff-sh/skiff/internal/resolvconf"
)

// SandboxConfig describes a pod's shared environment.
type SandboxConfig struct {
	PodUID       string // identity: RunSandbox is idempotent by UID (required)
	PodName      string
	PodNamespace string
	Hostname     string // default PodName
	PortMappings []PortMapping
	DNSServers   []string // empty: the node's /etc/resolv.conf
	DNSSearches  []string
	DNSOptions   []string
	Resources    Limits      // the pod cgroup's (PodResourcesFor); zero: minimum shares, unbounded
	HostAliases  []HostAlias // appended to the pod's /etc/hosts
}

// HostAlias is one /etc/hosts line: an IP and its names.
type HostAlias struct {
	IP        string
	Hostnames []string
}

// PortMapping is a hostPort published by the portmap CNI plugin.
type PortMapping struct {
	HostPort      int32  `json:"hostPort"`
	ContainerPort int32  `json:"containerPort"`
	Protocol      string `json:"protocol"` // tcp (default) or udp
	HostIP        string `json:"hostIP,omitempty"`
}

// Sandbox is a running pod environment.
type Sandbox struct {
	ID           string
	PodUID       string
	PodName      string
	PodNamespace string
	Hostname     string
	IP           string
	NetNSPath    string
	Dir          string // hosts, hostname, resolv.conf, logs
	PortMappings []PortMapping
	CreatedAt    time.Time
}

// RunSandbox creates the pod's network namespace, attaches it with CNI and
// writes the files its containers share. Calling it again for a pod whose
// sandbox is intact returns that sandbox; a half-made one is rebuilt.
func (r *Runtime) RunSandbox(ctx context.Context, s SandboxConfig) (*Sandbox, error) {
	if s.PodUID == "" {
		return nil, errors.New("runtime: SandboxConfig.PodUID is required")
	}
	if s.Hostname == "" {
		s.Hostname = s.PodName
	}
	if s.Hostname == "" {
		s.Hostname = sandboxID(s.PodUID)
	}
	ctx = r.ctx(ctx)
	defer r.locks.lock("pod/" + s.PodUID)()

	id := sandboxID(s.PodUID)
	if c, err := r.client.LoadContainer(ctx, id); err == nil {
		info, err := c.Info(ctx)
		if err != nil {
			return nil, err
		}
		sb := sandboxFromLabels(id, info.Labels, r.podDir(s.PodUID))
		sb.CreatedAt = info.CreatedAt
		if sb.IP != "" && isNetNS(sb.NetNSPath) {
			return sb, nil
		}
		if err := r.teardownSandbox(ctx, s.PodUID); err != nil {
			return nil, fmt.Errorf("rebuild half-made sandbox: %w", err)
		}
	} else if !errdefs.IsNotFound(err) {
		return nil, err
	}

	sb := &Sandbox{
		ID: id, PodUID: s.PodUID, PodName: s.PodName, PodNamespace: s.PodNamespace, Hostname: s.Hostname,
		NetNSPath: r.netnsPath(id), Dir: r.podDir(s.PodUID), PortMappings: s.PortMappings,
	}
	ok := false
	defer func() {
		if !ok {
			_ = r.teardownSandbox(context.WithoutCancel(ctx), s.PodUID)
		}
	}()
	// The record comes first so a crash at any later step leaves something
	// StopSandbox (or the next RunSandbox) can find and clean.
	cctx, end := op(ctx, "create sandbox", podAttr(s.PodUID))
	c, err := r.client.NewContainer(cctx, id,
		containerd.WithSpec(&oci.Spec{Version: specs.Version}),
		containerd.WithContainerLabels(sandboxLabels(sb)))
	end(&err)
	if err != nil {
		return nil, fmt.Errorf("sandbox record: %w", err)
	}
	if err := r.startSandbox(ctx, c, sb, s); err != nil {
		return nil, err
	}
	ok = true
	return sb, nil
}

// startSandbox brings a recorded sandbox up: namespace, CNI network, pod files, its IP label.
func (r *Runtime) startSandbox(ctx context.Context, c containerd.Container, sb *Sandbox, s SandboxConfig) (err error) {
	ctx, end := op(ctx, "start sandbox", podAttr(s.PodUID))
	defer end(&err)
	if err := os.MkdirAll(filepath.Join(sb.Dir, "logs"), 0o755); err != nil {
		return err
	}
	_ = removeNetNS(sb.NetNSPath) // leftover of a crash before the record existed
	if err := newNetNS(sb.NetNSPath); err != nil {
		return err
	}
	r.cniMu.Lock()
	res, err := r.cni.Setup(ctx, sb.ID, sb.NetNSPath, r.cniOpts(sb)...)
	r.cniMu.Unlock()
	if err != nil {
		return fmt.Errorf("cni add: %w", err)
	}
	if sb.IP, err = podIP(res); err != nil {
		return err
	}
	if r.o.NetworkReady != nil {
		if err := r.o.NetworkReady(ctx, sb.NetNSPath); err != nil {
			return fmt.Errorf("pod network: %w", err)
		}
	}
	if err := writePodFiles(sb, s); err != nil {
		return err
	}
	if err := r.ensurePodCgroup(s.PodUID, s.Resources); err != nil {
		return fmt.Errorf("pod cgroup: %w", err)
	}
	if _, err := c.SetLabels(ctx, map[string]string{labelIP: sb.IP}); err != nil {
		return err
	}
	info, err := c.Info(ctx)
	if err != nil {
		return err
	}
	sb.CreatedAt = info.CreatedAt
	trace.SpanFromContext(ctx).SetAttributes(attribute.String("k8s.pod.ip", sb.IP))
	return nil
}

// StopSandbox kills and deletes the pod's containers, detaches the network
// (CNI DEL: veth and IP released), removes the namespace and the pod's files
// and cgroups, and drops the record. A pod with nothing left is not an error.
func (r *Runtime) StopSandbox(ctx context.Context, podUID string) (err error) {
	ctx, end := op(r.ctx(ctx), "stop sandbox", podAttr(podUID))
	defer end(&err)
	defer r.locks.lock("pod/" + podUID)()
	return r.teardownSandbox(ctx, podUID)
}

func (r *Runtime) teardownSandbox(ctx context.Context, podUID string) error {
	cs, err := r.client.Containers(ctx, labelFilter(labelRole, roleContainer)+","+labelFilter(labelPodUID, podUID))
	if err != nil {
		return err
	}
	var errs []error
	for _, c := range cs {
		if err := r.StopContainer(ctx, c.ID(), 0); err != nil {
			errs = append(errs, err)
		}
	}

	id := sandboxID(podUID)
	sb := &Sandbox{ID: id, PodUID: podUID, NetNSPath: r.netnsPath(id), Dir: r.podDir(podUID)}
	rec, err := r.client.LoadContainer(ctx, id)
	if err == nil {
		if labels, err := rec.Labels(ctx); err == nil {
			sb = sandboxFromLabels(id, labels, sb.Dir)
		}
	} else if !errdefs.IsNotFound(err) {
		return err
	}
	errs = append(errs, r.detachNetwork(ctx, sb)...)
	if err := unmountUnder(sb.Dir); err != nil {
		errs = append(errs, err)
	} else if err := os.RemoveAll(sb.Dir); err != nil {
		errs = append(errs, err)
	}
	if err := r.removePodCgroups(podUID); err != nil {
		errs = append(errs, err)
	}
	if len(errs) > 0 {
		return errors.Join(errs...) // the record stays so a retry finds the pod
	}
	if rec != nil {
		if err := rec.Delete(ctx); err != nil && !errdefs.IsNotFound(err) {
			return err
		}
	}
	return nil
}

// FinishSandbox leaves what a finished (Succeeded or Failed) pod keeps until it is deleted,
// as Kubernetes' kubelet keeps a terminated pod's exited containers: every container's process
// ends and its task (and shim) goes, but the container and its log files stay, so logs (and
// --previous) are still served; the network is detached (CNI DEL releases the IP), the
// namespace, cgroups and the pod's other files (volumes: an evicted pod's disk is freed) go,
// and the record is marked finished. StopSandbox removes the rest.
// A pod without a record keeps nothing: StopSandbox is all it gets.
func (r *Runtime) FinishSandbox(ctx context.Context, podUID string) (err error) {
	ctx, end := op(r.ctx(ctx), "finish sandbox", podAttr(podUID))
	defer end(&err)
	defer r.locks.lock("pod/" + podUID)()
	id := sandboxID(podUID)
	rec, err := r.client.LoadContainer(ctx, id)
	if errdefs.IsNotFound(err) {
		return r.teardownSandbox(ctx, podUID)
	}
	if err != nil {
		return err
	}
	labels, err := rec.Labels(ctx)
	if err != nil || labels[labelFinished] == "true" {
		return err
	}
	cs, err := r.client.Containers(ctx, labelFilter(labelRole, roleContainer)+","+labelFilter(labelPodUID, podUID))
	if err != nil {
		return err
	}
	var errs []error
	for _, c := range cs {
		err := r.withContainer(ctx, c.ID(), func(ctx context.Context, c containerd.Container) error {
			if err := r.killTask(ctx, "stop container", c, 0); err != nil {
				return err
			}
			return r.deleteTask(ctx, c)
		})
		if err != nil {
			errs = append(errs, err)
		}
	}
	errs = append(errs, r.detachNetwork(ctx, sandboxFromLabels(id, labels, r.podDir(podUID)))...)
	if err := r.removePodCgroups(podUID); err != nil {
		errs = append(errs, err)
	}
	if err := removeAllBut(r.podDir(podUID), "logs"); err != nil {
		errs = append(errs, err)
	}
	if len(errs) > 0 {
		return errors.Join(errs...) // not marked: the next sync finishes it
	}
	_, err = rec.SetLabels(ctx, map[string]string{labelIP: "", labelFinished: "true"})
	return err
}

// removeAllBut unmounts everything under dir and removes all of it but the entry keep.
func removeAllBut(dir, keep string) error {
	if err := unmountUnder(dir); err != nil {
		return err
	}
	entries, err := os.ReadDir(dir)
	if errors.Is(err, os.ErrNotExist) {
		return nil
	}
	if err != nil {
		return err
	}
	for _, e := range entries {
		if e.Name() != keep {
			if err := os.RemoveAll(filepath.Join(dir, e.Name())); err != nil {
				return err
			}
		}
	}
	return nil
}

// detachNetwork releases the pod's network: CNI DEL (even without a namespace: IPAM must
// still release the address), then the namespace.
func (r *Runtime) detachNetwork(ctx context.Context, sb *Sandbox) []error {
	var errs []error
	path := sb.NetNSPath
	if !isNetNS(path) {
		path = ""
	}
	r.cniMu.Lock()
	err := r.cni.Remove(ctx, sb.ID, path, r.cniOpts(sb)...)
	r.cniMu.Unlock()
	if err != nil {
		errs = append(errs, fmt.Errorf("cni del: %w", err))
	}
	if err := removeNetNS(sb.NetNSPath); err != nil {
		errs = append(errs, err)
	}
	return errs
}

func (r *Runtime) cniOpts(sb *Sandbox) []gocni.NamespaceOpts {
	// IgnoreUnknown: plugins that do not know the K8S_* args must not fail.
	opts := []gocni.NamespaceOpts{gocni.WithArgs("IgnoreUnknown", "1"), gocni.WithLabels(map[string]string{
		"K8S_POD_NAMESPACE":          sb.PodNamespace,
		"K8S_POD_NAME":               sb.PodName,
		"K8S_POD_INFRA_CONTAINER_ID": sb.ID,
		"K8S_POD_UID":                sb.PodUID,
	})}
	if len(sb.PortMappings) > 0 {
		pm := make([]gocni.PortMapping, 0, len(sb.PortMappings))
		for _, p := range sb.PortMappings {
			proto := strings.ToLower(p.Protocol)
			if proto == "" {
				proto = "tcp"
			}
			pm = append(pm, gocni.PortMapping{HostPort: p.HostPort, ContainerPort: p.ContainerPort, Protocol: proto, HostIP: p.HostIP})
		}
		opts = append(opts, gocni.WithCapabilityPortMap(pm))
	}
	return opts
}

func sandboxLabels(sb *Sandbox) map[string]string {
	l := map[string]string{
		labelRole:     roleSandbox,
		labelPodUID:   sb.PodUID,
		labelPodName:  sb.PodName,
		labelPodNS:    sb.PodNamespace,
		labelHostname: sb.Hostname,
		labelNetNS:    sb.NetNSPath,
	}
	if len(sb.PortMappings) > 0 {
		b, _ := json.Marshal(sb.PortMappings)
		l[labelPorts] = string(b)
	}
	return l
}

func sandboxFromLabels(id string, l map[string]string, dir string) *Sandbox {
	sb := &Sandbox{
		ID: id, PodUID: l[labelPodUID], PodName: l[labelPodName], PodNamespace: l[labelPodNS],
		Hostname: l[labelHostname], IP: l[labelIP], NetNSPath: l[labelNetNS], Dir: dir,
	}
	if p := l[labelPorts]; p != "" {
		_ = json.Unmarshal([]byte(p), &sb.PortMappings)
	}
	return sb
}

// writePodFiles writes the hosts, hostname and resolv.conf every container
// of the pod bind-mounts, as the kubelet does.
func writePodFiles(sb *Sandbox, s SandboxConfig) error {
	hosts := fmt.Sprintf("# Managed by skiff.\n127.0.0.1\tlocalhost\n::1\tlocalhost ip6-localhost ip6-loopback\n%s\t%s\n", sb.IP, sb.Hostname)
	if len(s.HostAliases) > 0 {
		hosts += "\n# Entries added by HostAliases.\n"
		for _, a := range s.HostAliases {
			hosts += a.IP + "\t" + strings.Join(a.Hostnames, "\t") + "\n"
		}
	}
	resolv, err := resolvConf(s)
	if err != nil {
		return err
	}
	for name, data := range map[string]string{"hosts": hosts, "hostname": sb.Hostname + "\n", "resolv.conf": resolv} {
		if err := os.WriteFile(filepath.Join(sb.Dir, name), []byte(data), 0o644); err != nil {
			return err
		}
	}
	return nil
}

func resolvConf(s SandboxConfig) (string, error) {
	if len(s.DNSServers) == 0 && len(s.DNSSearches) == 0 && len(s.DNSOptions) == 0 {
		b, err := os.ReadFile("/etc/resolv.conf")
		if errors.Is(err, os.ErrNotExist) {
			return "", nil
		}
		return string(b), err
	}
	return resolvconf.Config{Nameservers: s.DNSServers, Searches: s.DNSSearches, Options: s.DNSOptions}.String(), nil
}

// labelFilter is a containerd filter for one label value.
func labelFilter(key, value string) string {
	return fmt.Sprintf("labels.%q==%q", key, value)
}

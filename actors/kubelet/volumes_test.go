package kubelet_test

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/moby/sys/mountinfo"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/utils/ptr"

	"github.com/skiff-sh/skiff/actors/controllers/controllerkit"
)

// exec runs httpecho's -cat in the pod's first container and returns what it printed.
func (h *harness) cat(p *corev1.Pod, path string) (string, error) {
	if len(p.Status.ContainerStatuses) == 0 || p.Status.ContainerStatuses[0].ContainerID == "" {
		return "", fmt.Errorf("pod %s has no container yet", p.Name)
	}
	id := strings.TrimPrefix(p.Status.ContainerStatuses[0].ContainerID, "containerd://")
	var out, errOut bytes.Buffer
	code, err := h.n.Runtime.Exec(ctx(h.t), id, []string{"/httpecho", "-cat", path}, nil, &out, &errOut, false)
	if err != nil {
		return "", err
	}
	if code != 0 {
		return "", fmt.Errorf("cat %s: exit %d: %s", path, code, errOut.String())
	}
	return out.String(), nil
}

func (h *harness) createAll(objs ...runtime.Object) {
	h.t.Helper()
	for _, o := range objs {
		if _, err := h.cp.Client.Create(ctx(h.t), o); err != nil {
			h.t.Fatal(err)
		}
	}
}

func fsType(t *testing.T, path string) string {
	t.Helper()
	ms, err := mountinfo.GetMounts(mountinfo.SingleEntryFilter(path))
	if err != nil {
		t.Fatal(err)
	}
	if len(ms) == 0 {
		return "" // not a mount point: the pod directory's filesystem
	}
	return ms[0].FSType
}

func objMeta(name string) metav1.ObjectMeta {
	return metav1.ObjectMeta{Name: name, Namespace: "default"}
}

// One pod mounts every supported volume type and takes env from ConfigMaps, Secrets, its
// resources and the Services; its process sees all of it, a ConfigMap change reaches the
// file, and deleting the pod leaves no mount or file behind.
func TestPodVolumesAndEnvironment(t *testing.T) {
	h := start(t)
	hostDir := filepath.Join(t.TempDir(), "host", "made")
	h.createAll(
		&corev1.ConfigMap{ObjectMeta: objMeta("cfg"), Data: map[string]string{"greeting": "hello", "mode": "fast"}},
		&corev1.Secret{ObjectMeta: objMeta("sec"), StringData: map[string]string{"password": "hunter2", "token": "t0k"}},
		&corev1.Service{ObjectMeta: objMeta("back-end"), Spec: corev1.ServiceSpec{Selector: map[string]string{"app": "none"},
			Ports: []corev1.ServicePort{{Name: "http", Port: 8081}}}},
	)
	p := pod("vols", func(p *corev1.Pod) {
		c := &p.Spec.Containers[0]
		c.Resources.Limits = corev1.ResourceList{corev1.ResourceMemory: resource.MustParse("64Mi")}
		c.EnvFrom = []corev1.EnvFromSource{
			{Prefix: "CFG_", ConfigMapRef: &corev1.ConfigMapEnvSource{LocalObjectReference: corev1.LocalObjectReference{Name: "cfg"}}},
			{SecretRef: &corev1.SecretEnvSource{LocalObjectReference: corev1.LocalObjectReference{Name: "sec"}}},
			{ConfigMapRef: &corev1.ConfigMapEnvSource{LocalObjectReference: corev1.LocalObjectReference{Name: "absent"}, Optional: ptr.To(true)}},
		}
		c.Env = append(c.Env,
			corev1.EnvVar{Name: "PW", ValueFrom: &corev1.EnvVarSource{SecretKeyRef: &corev1.SecretKeySelector{LocalObjectReference: corev1.LocalObjectReference{Name: "sec"}, Key: "password"}}},
			corev1.EnvVar{Name: "MEM_MI", ValueFrom: &corev1.EnvVarSource{ResourceFieldRef: &corev1.ResourceFieldSelector{Resource: "limits.memory", Divisor: resource.MustParse("1Mi")}}},
			corev1.EnvVar{Name: "URL", Value: "http://$(BACK_END_SERVICE_HOST):$(BACK_END_SERVICE_PORT)"},
		)
		c.VolumeMounts = []corev1.VolumeMount{
			{Name: "cfg", MountPath: "/etc/cfg"},
			{Name: "sec", MountPath: "/etc/sec"},
			{Name: "info", MountPath: "/etc/info"},
			{Name: "scratch", MountPath: "/scratch"},
			{Name: "mem", MountPath: "/mem"},
			{Name: "proj", MountPath: "/etc/proj"},
			{Name: "host", MountPath: "/host"},
			{Name: "cfg", MountPath: "/greeting", SubPath: "greeting"},
		}
		p.Spec.Volumes = []corev1.Volume{
			{Name: "cfg", VolumeSource: corev1.VolumeSource{ConfigMap: &corev1.ConfigMapVolumeSource{LocalObjectReference: corev1.LocalObjectReference{Name: "cfg"}}}},
			{Name: "sec", VolumeSource: corev1.VolumeSource{Secret: &corev1.SecretVolumeSource{SecretName: "sec", DefaultMode: ptr.To(int32(0o400)),
				Items: []corev1.KeyToPath{{Key: "password", Path: "db/password"}}}}},
			{Name: "info", VolumeSource: corev1.VolumeSource{DownwardAPI: &corev1.DownwardAPIVolumeSource{Items: []corev1.DownwardAPIVolumeFile{
				{Path: "labels", FieldRef: &corev1.ObjectFieldSelector{FieldPath: "metadata.labels"}},
				{Path: "mem", ResourceFieldRef: &corev1.ResourceFieldSelector{ContainerName: "web", Resource: "limits.memory"}},
			}}}},
			{Name: "scratch", VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{}}},
			{Name: "mem", VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{Medium: corev1.StorageMediumMemory}}},
			{Name: "proj", VolumeSource: corev1.VolumeSource{Projected: &corev1.ProjectedVolumeSource{Sources: []corev1.VolumeProjection{
				{ConfigMap: &corev1.ConfigMapProjection{LocalObjectReference: corev1.LocalObjectReference{Name: "cfg"}, Items: []corev1.KeyToPath{{Key: "mode", Path: "mode"}}}},
				{Secret: &corev1.SecretProjection{LocalObjectReference: corev1.LocalObjectReference{Name: "sec"}, Items: []corev1.KeyToPath{{Key: "token", Path: "token"}}}},
				{DownwardAPI: &corev1.DownwardAPIProjection{Items: []corev1.DownwardAPIVolumeFile{{Path: "name", FieldRef: &corev1.ObjectFieldSelector{FieldPath: "metadata.name"}}}}},
			}}}},
			{Name: "host", VolumeSource: corev1.VolumeSource{HostPath: &corev1.HostPathVolumeSource{Path: hostDir, Type: ptr.To(corev1.HostPathDirectoryOrCreate)}}},
		}
	})
	h.create(p)
	p = h.waitPod("vols", 60*time.Second, runningReady)

	for path, want := range map[string]string{
		"/etc/cfg/greeting":    "hello",
		"/greeting":            "hello",
		"/etc/sec/db/password": "hunter2",
		"/etc/info/labels":     `app="vols"`,
		"/etc/info/mem":        "67108864",
		"/etc/proj/mode":       "fast",
		"/etc/proj/token":      "t0k",
		"/etc/proj/name":       "vols",
	} {
		if got, err := h.cat(p, path); err != nil || got != want {
			t.Errorf("%s = %q (%v), want %q", path, got, err, want)
		}
	}
	if st, err := os.Stat(hostDir); err != nil || !st.IsDir() {
		t.Errorf("hostPath DirectoryOrCreate did not make %s: %v", hostDir, err)
	}

	// The process environment, as the container's PID 1 has it.
	environ, err := h.cat(p, "/proc/1/environ")
	if err != nil {
		t.Fatal(err)
	}
	vars := map[string]string{}
	for _, kv := range strings.Split(environ, "\x00") {
		if k, v, ok := strings.Cut(kv, "="); ok {
			vars[k] = v
		}
	}
	svc, err := h.cp.Client.Get(ctx(t), controllerkit.MustKind("", "services"), "default", "back-end")
	if err != nil {
		t.Fatal(err)
	}
	ip := svc.(*corev1.Service).Spec.ClusterIP
	for k, want := range map[string]string{
		"CFG_greeting": "hello", "CFG_mode": "fast", "password": "hunter2", "token": "t0k", "PW": "hunter2",
		"MEM_MI": "64", "BACK_END_SERVICE_HOST": ip, "BACK_END_SERVICE_PORT": "8081", "BACK_END_SERVICE_PORT_HTTP": "8081",
		"BACK_END_PORT": "tcp://" + ip + ":8081", "BACK_END_PORT_8081_TCP_ADDR": ip, "URL": "http://" + ip + ":8081",
	} {
		if vars[k] != want {
			t.Errorf("env %s = %q, want %q", k, vars[k], want)
		}
	}

	// Secret, projected and Memory volumes are tmpfs; configMap and disk emptyDir are not.
	vdir := filepath.Join(h.n.Runtime.PodDir(string(p.UID)), "volumes")
	for dir, want := range map[string]string{
		"kubernetes.io~secret/sec": "tmpfs", "kubernetes.io~projected/proj": "tmpfs", "kubernetes.io~empty-dir/mem": "tmpfs",
		"kubernetes.io~configmap/cfg": "", "kubernetes.io~empty-dir/scratch": "",
	} {
		if got := fsType(t, filepath.Join(vdir, dir)); got != want {
			t.Errorf("%s is on %q, want %q", dir, got, want)
		}
	}

	// A new agent adopts the pod: same container, the tmpfs and its contents kept.
	keep := filepath.Join(vdir, "kubernetes.io~empty-dir/mem/keep")
	if err := os.WriteFile(keep, []byte("kept"), 0o644); err != nil {
		t.Fatal(err)
	}
	pid := h.sandboxOf(p).Containers[0].Pid
	h.newAgent()
	h.create(pod("after-restart"))
	h.waitPod("after-restart", 30*time.Second, runningReady) // the new agent has synced
	if sb := h.sandboxOf(p); sb == nil || len(sb.Containers) != 1 || sb.Containers[0].Pid != pid {
		t.Fatalf("after a new agent the pod runs %+v, want pid %d", sb, pid)
	}
	if got, err := h.cat(p, "/mem/keep"); err != nil || got != "kept" {
		t.Fatalf("memory emptyDir after a new agent: %q, %v", got, err)
	}
	if got := fsType(t, filepath.Join(vdir, "kubernetes.io~secret/sec")); got != "tmpfs" {
		t.Fatalf("secret volume after a new agent is on %q", got)
	}
	if ms, _ := mountinfo.GetMounts(mountinfo.PrefixFilter(vdir)); len(ms) != 3 {
		t.Fatalf("%d mounts under the pod's volumes after a new agent, want the 3 tmpfs (none stacked)", len(ms))
	}

	// A ConfigMap change reaches the file (not the subPath copy, as in Kubernetes).
	o, err := h.cp.Client.Get(ctx(t), controllerkit.MustKind("", "configmaps"), "default", "cfg")
	if err != nil {
		t.Fatal(err)
	}
	cm := o.(*corev1.ConfigMap)
	cm.Data["greeting"] = "bonjour"
	changed := time.Now()
	if _, err := h.cp.Client.Update(ctx(t), cm); err != nil {
		t.Fatal(err)
	}
	wait(t, 3*h.cfg.ResyncInterval, func() error {
		got, err := h.cat(p, "/etc/cfg/greeting")
		if err == nil && got != "bonjour" {
			err = fmt.Errorf("greeting = %q", got)
		}
		return err
	})
	t.Logf("ConfigMap update reached the file in %v (resync interval %v)", time.Since(changed).Round(time.Millisecond), h.cfg.ResyncInterval)

	h.deletePod("vols")
	h.waitGone("vols")
	if _, err := os.Stat(h.n.Runtime.PodDir(string(p.UID))); !os.IsNotExist(err) {
		t.Errorf("pod dir left after deletion: %v", err)
	}
	if ms, _ := mountinfo.GetMounts(mountinfo.PrefixFilter(vdir)); len(ms) > 0 {
		t.Errorf("%d mounts left after deletion", len(ms))
	}
}

// A pod whose env names a missing ConfigMap waits with Kubernetes' reason and message, and
// starts once the ConfigMap exists.
func TestMissingConfigMapWaitsThenStarts(t *testing.T) {
	h := start(t)
	h.create(pod("late", func(p *corev1.Pod) {
		p.Spec.Containers[0].Env = append(p.Spec.Containers[0].Env, corev1.EnvVar{Name: "MODE",
			ValueFrom: &corev1.EnvVarSource{ConfigMapKeyRef: &corev1.ConfigMapKeySelector{LocalObjectReference: corev1.LocalObjectReference{Name: "late-cfg"}, Key: "mode"}}})
	}))
	h.waitPod("late", 30*time.Second, func(p *corev1.Pod) error {
		for _, cs := range p.Status.ContainerStatuses {
			if w := cs.State.Waiting; w != nil && w.Reason == "CreateContainerConfigError" && w.Message == `configmap "late-cfg" not found` {
				return nil
			}
		}
		return fmt.Errorf("statuses %+v", p.Status.ContainerStatuses)
	})
	h.expectEvent("Failed")
	created := time.Now()
	h.createAll(&corev1.ConfigMap{ObjectMeta: objMeta("late-cfg"), Data: map[string]string{"mode": "on"}})
	h.waitPod("late", 30*time.Second, runningReady)
	t.Logf("Running %v after the ConfigMap was created (retry every %v)", time.Since(created).Round(time.Millisecond), h.cfg.BackoffBase)

	// In a volume: FailedMount naming it, ContainerCreating, then Running once it exists.
	h.create(pod("late-vol", func(p *corev1.Pod) {
		p.Spec.Containers[0].VolumeMounts = []corev1.VolumeMount{{Name: "s", MountPath: "/s"}}
		p.Spec.Volumes = []corev1.Volume{{Name: "s", VolumeSource: corev1.VolumeSource{Secret: &corev1.SecretVolumeSource{SecretName: "late-sec"}}}}
	}))
	h.expectEventMessage("FailedMount", `MountVolume.SetUp failed for volume "s" : secret "late-sec" not found`)
	if p, err := h.get("late-vol"); err != nil || p.Status.Phase != corev1.PodPending {
		t.Fatalf("pod with a missing Secret volume: %v %v", p.Status.Phase, err)
	}
	h.createAll(&corev1.Secret{ObjectMeta: objMeta("late-sec"), StringData: map[string]string{"k": "v"}})
	p := h.waitPod("late-vol", 30*time.Second, runningReady)
	if got, err := h.cat(p, "/s/k"); err != nil || got != "v" {
		t.Fatalf("/s/k = %q, %v", got, err)
	}
}

func (h *harness) expectEventMessage(reason, message string) {
	h.t.Helper()
	wait(h.t, 10*time.Second, func() error {
		objs, _, err := h.cp.Client.List(ctx(h.t), controllerkit.MustKind("", "events"), "default", nil)
		if err != nil {
			return err
		}
		for _, o := range objs {
			if e := o.(*corev1.Event); e.Reason == reason && e.Message == message {
				return nil
			}
		}
		return fmt.Errorf("no %s event %q among %d", reason, message, len(objs))
	})
}

// A pod whose disk emptyDir outgrows its sizeLimit is evicted as Kubernetes' eviction manager
// does it, and its sandbox removed.
func TestEmptyDirSizeLimitEvicts(t *testing.T) {
	h := start(t)
	h.create(pod("hog", func(p *corev1.Pod) {
		p.Spec.Containers[0].VolumeMounts = []corev1.VolumeMount{{Name: "scratch", MountPath: "/scratch"}}
		p.Spec.Volumes = []corev1.Volume{{Name: "scratch", VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{SizeLimit: ptr.To(resource.MustParse("1Mi"))}}}}
	}))
	p := h.waitPod("hog", 60*time.Second, runningReady)
	// Written on the node, where the volume's blocks are counted: the image has no shell.
	file := filepath.Join(h.n.Runtime.PodDir(string(p.UID)), "volumes", "kubernetes.io~empty-dir", "scratch", "big")
	if err := os.WriteFile(file, bytes.Repeat([]byte("x"), 2<<20), 0o644); err != nil {
		t.Fatal(err)
	}
	wrote := time.Now()
	p = h.waitPod("hog", 3*h.cfg.ResyncInterval, func(p *corev1.Pod) error {
		if p.Status.Phase != corev1.PodFailed || p.Status.Reason != "Evicted" {
			return fmt.Errorf("phase %s reason %q", p.Status.Phase, p.Status.Reason)
		}
		return nil
	})
	t.Logf("evicted %v after the write", time.Since(wrote).Round(time.Millisecond))
	if want := `Usage of EmptyDir volume "scratch" exceeds the limit "1Mi". `; p.Status.Message != want {
		t.Errorf("message %q, want %q", p.Status.Message, want)
	}
	h.expectEvent("Evicted")
	h.waitFinished(p) // the volume is gone with its blocks
}

package runtime

import (
	"bytes"
	"context"
	"errors"
	"io"
	"strconv"
	"strings"
	"testing"

	"k8s.io/utils/ptr"
)

// A container's security context is in force inside it: user, groups, bounding capabilities,
// no_new_privs and a read-only root filesystem, each beside a default container showing the
// opposite; runAsNonRoot with an image that runs as root does not start.
func TestSecurityContextInForce(t *testing.T) {
	f := env(t)
	ctx := context.Background()
	sb := newPod(t, f, "security")
	plain := start(t, f, sb, ContainerConfig{Name: "plain"})
	user := start(t, f, sb, ContainerConfig{Name: "user", Args: []string{"-port", "8081"}, Security: Security{
		RunAsUser: ptr.To[int64](1000), RunAsGroup: ptr.To[int64](3000), SupplementalGroups: []int64{4000},
		NoNewPrivileges: true, CapDrop: []string{"NET_RAW"}}})
	ro := start(t, f, sb, ContainerConfig{Name: "ro", Args: []string{"-port", "8082"}, Security: Security{
		ReadOnlyRootFS: true, CapDrop: []string{"CHOWN"}}})

	run := func(id string, stdin io.Reader, args ...string) (int, string) {
		t.Helper()
		var out, errb bytes.Buffer
		code, err := f.rt.Exec(ctx, id, append([]string{"/httpecho"}, args...), stdin, &out, &errb, false)
		if err != nil {
			t.Fatalf("exec %v in %s: %v", args, id, err)
		}
		return code, out.String() + errb.String()
	}
	status := func(id string) map[string]string {
		t.Helper()
		code, out := run(id, nil, "-cat", "/proc/self/status")
		if code != 0 {
			t.Fatalf("cat status: exit %d: %s", code, out)
		}
		m := map[string]string{}
		for _, l := range strings.Split(out, "\n") {
			if k, v, ok := strings.Cut(l, ":"); ok {
				m[k] = strings.Join(strings.Fields(v), " ")
			}
		}
		return m
	}
	hasCap := func(st map[string]string, set string, bit uint) bool {
		t.Helper()
		v, err := strconv.ParseUint(st[set], 16, 64)
		if err != nil {
			t.Fatalf("%s %q: %v", set, st[set], err)
		}
		return v&(1<<bit) != 0
	}
	const capChown, capNetRaw = 0, 13

	p, u, r := status(plain.ID), status(user.ID), status(ro.ID)
	if p["Uid"] != "0 0 0 0" || !hasCap(p, "CapEff", capChown) || !hasCap(p, "CapBnd", capNetRaw) || p["NoNewPrivs"] != "0" {
		t.Errorf("default container: Uid %q CapEff %s CapBnd %s NoNewPrivs %s, want root with CHOWN and NET_RAW", p["Uid"], p["CapEff"], p["CapBnd"], p["NoNewPrivs"])
	}
	// The primary group is a supplementary one too, as under containerd's CRI plugin.
	if u["Uid"] != "1000 1000 1000 1000" || u["Gid"] != "3000 3000 3000 3000" || u["Groups"] != "3000 4000" {
		t.Errorf("runAsUser 1000 runAsGroup 3000 supplementalGroups [4000]: Uid %q Gid %q Groups %q", u["Uid"], u["Gid"], u["Groups"])
	}
	if hasCap(u, "CapBnd", capNetRaw) || u["NoNewPrivs"] != "1" {
		t.Errorf("NET_RAW dropped, no privilege escalation: CapBnd %s NoNewPrivs %s", u["CapBnd"], u["NoNewPrivs"])
	}
	if hasCap(r, "CapEff", capChown) || !hasCap(r, "CapEff", capNetRaw) {
		t.Errorf("CHOWN dropped alone: CapEff %s", r["CapEff"])
	}
	write := func(id string) (int, string) { return run(id, strings.NewReader("x"), "-write", "/tmp/x") }
	if code, out := write(plain.ID); code != 0 {
		t.Errorf("write to a writable root: exit %d: %s", code, out)
	}
	if code, out := write(ro.ID); code == 0 || !strings.Contains(out, "read-only file system") {
		t.Errorf("write to a read-only root: exit %d: %s", code, out)
	}

	// The test image has no user: it runs as root, which runAsNonRoot refuses.
	_, err := f.rt.StartContainer(ctx, sb, ContainerConfig{Name: "nonroot", Image: testImage, Security: Security{RunAsNonRoot: true}})
	var ce *ConfigError
	if want := "container has runAsNonRoot and image will run as root (pod: \"security_default(" + sb.PodUID + ")\", container: nonroot)"; !errors.As(err, &ce) || ce.Msg != want {
		t.Errorf("runAsNonRoot with a root image: %v, want %q", err, want)
	}
	if _, err := f.rt.StartContainer(ctx, sb, ContainerConfig{Name: "nonroot", Image: testImage,
		Args: []string{"-port", "8083"}, Security: Security{RunAsNonRoot: true, RunAsUser: ptr.To[int64](1000)}}); err != nil {
		t.Errorf("runAsNonRoot with runAsUser 1000: %v", err)
	}
}

func TestVerifyNonRoot(t *testing.T) {
	for _, tc := range []struct {
		user string
		s    Security
		want string
	}{
		{"", Security{}, ""},
		{"", Security{RunAsNonRoot: true}, "image will run as root"},
		{"0:0", Security{RunAsNonRoot: true}, "image will run as root"},
		{"1000:1000", Security{RunAsNonRoot: true}, ""},
		{"nobody", Security{RunAsNonRoot: true}, "image has non-numeric user (nobody), cannot verify user is non-root"},
		{"nobody", Security{RunAsNonRoot: true, RunAsUser: ptr.To[int64](65534)}, ""},
		{"1000", Security{RunAsNonRoot: true, RunAsUser: ptr.To[int64](0)}, "container's runAsUser breaks non-root policy"},
	} {
		err := verifyNonRoot(tc.user, tc.s, "p_ns(uid)", "c")
		if tc.want == "" && err != nil || tc.want != "" && (err == nil || !strings.Contains(err.Error(), tc.want)) {
			t.Errorf("image user %q %+v: %v, want %q", tc.user, tc.s, err, tc.want)
		}
	}
}

// hostAliases are lines of the /etc/hosts every container of the pod sees.
func TestHostAliasesInPodHosts(t *testing.T) {
	f := env(t)
	ctx := context.Background()
	sb, err := f.rt.RunSandbox(ctx, SandboxConfig{PodUID: "uid-aliases-" + randHex(4), PodName: "aliases", PodNamespace: "default",
		HostAliases: []HostAlias{{IP: "10.1.2.3", Hostnames: []string{"db.local", "db"}}}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = f.rt.StopSandbox(context.Background(), sb.PodUID) })
	c := start(t, f, sb, ContainerConfig{})
	var out, errb bytes.Buffer
	if code, err := f.rt.Exec(ctx, c.ID, []string{"/httpecho", "-cat", "/etc/hosts"}, nil, &out, &errb, false); err != nil || code != 0 {
		t.Fatalf("cat /etc/hosts: %v, exit %d: %s", err, code, errb.String())
	}
	if !strings.Contains(out.String(), sb.IP+"\taliases\n") || !strings.Contains(out.String(), "\n10.1.2.3\tdb.local\tdb\n") {
		t.Errorf("/etc/hosts with an alias:\n%s", out.String())
	}
}

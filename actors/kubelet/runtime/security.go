package runtime

import (
	"context"
	"fmt"
	"slices"
	"strconv"
	"strings"

	"github.com/containerd/containerd/v2/core/containers"
	"github.com/containerd/containerd/v2/pkg/oci"
)

// Security is a container's security context with the pod's defaults already applied
// (Kubernetes' precedence: a container's field over the pod's).
type Security struct {
	RunAsUser          *int64
	RunAsGroup         *int64
	RunAsNonRoot       bool
	SupplementalGroups []int64
	ReadOnlyRootFS     bool
	NoNewPrivileges    bool
	CapAdd, CapDrop    []string // Kubernetes names (NET_RAW) or with the CAP_ prefix; ALL for every one
}

// ConfigError is a container its pod's spec does not let start (the kubelet's
// CreateContainerConfigError); the pod has to change, not the node.
type ConfigError struct{ Msg string }

func (e *ConfigError) Error() string { return e.Msg }

// securityOpts builds the user, groups, root filesystem and capabilities as containerd's CRI
// plugin does: the user string is runAsUser (else the image's user) with runAsGroup as its
// group, the image's /etc/group adds its groups, then the supplemental ones; capabilities start
// from containerd's default set.
func securityOpts(imageUser string, s Security) []oci.SpecOpts {
	var opts []oci.SpecOpts
	user := imageUser
	if s.RunAsUser != nil {
		user = strconv.FormatInt(*s.RunAsUser, 10)
	}
	if s.RunAsGroup != nil {
		uid, _, _ := strings.Cut(user, ":")
		if uid == "" {
			uid = "0"
		}
		user = uid + ":" + strconv.FormatInt(*s.RunAsGroup, 10)
	}
	if user != imageUser { // the image's user is set by WithImageConfig already
		opts = append(opts, oci.WithUser(user), oci.WithAdditionalGIDs(user))
	}
	if len(s.SupplementalGroups) > 0 {
		opts = append(opts, withSupplementalGroups(s.SupplementalGroups))
	}
	if s.ReadOnlyRootFS {
		opts = append(opts, oci.WithRootFSReadonly())
	}
	// containerd's default spec sets no_new_privs; Kubernetes sets it only for
	// allowPrivilegeEscalation: false, so setuid binaries work by default.
	opts = append(opts, func(_ context.Context, _ oci.Client, _ *containers.Container, spec *oci.Spec) error {
		spec.Process.NoNewPrivileges = s.NoNewPrivileges
		return nil
	})
	add, drop := capNames(s.CapAdd), capNames(s.CapDrop)
	if slices.Contains(add, "CAP_ALL") {
		opts = append(opts, oci.WithAllCurrentCapabilities)
	}
	if slices.Contains(drop, "CAP_ALL") {
		opts = append(opts, oci.WithCapabilities(nil))
	}
	add = slices.DeleteFunc(add, func(c string) bool { return c == "CAP_ALL" })
	drop = slices.DeleteFunc(drop, func(c string) bool { return c == "CAP_ALL" })
	if len(add) > 0 {
		opts = append(opts, oci.WithAddedCapabilities(add))
	}
	if len(drop) > 0 {
		opts = append(opts, oci.WithDroppedCapabilities(drop))
	}
	return opts
}

func withSupplementalGroups(gids []int64) oci.SpecOpts {
	return func(_ context.Context, _ oci.Client, _ *containers.Container, s *oci.Spec) error {
		for _, g := range gids {
			if !slices.Contains(s.Process.User.AdditionalGids, uint32(g)) {
				s.Process.User.AdditionalGids = append(s.Process.User.AdditionalGids, uint32(g))
			}
		}
		return nil
	}
}

// capNames gives Kubernetes capability names the CAP_ prefix the OCI spec uses.
func capNames(caps []string) []string {
	out := make([]string, 0, len(caps))
	for _, c := range caps {
		c = strings.ToUpper(c)
		if !strings.HasPrefix(c, "CAP_") {
			c = "CAP_" + c
		}
		out = append(out, c)
	}
	return out
}

// verifyNonRoot refuses a runAsNonRoot container that would run as root or whose image user
// cannot be told apart from root, with the kubelet's messages.
func verifyNonRoot(imageUser string, s Security, pod, container string) error {
	if !s.RunAsNonRoot {
		return nil
	}
	if s.RunAsUser != nil {
		if *s.RunAsUser == 0 {
			return &ConfigError{fmt.Sprintf("container's runAsUser breaks non-root policy (pod: %q, container: %s)", pod, container)}
		}
		return nil
	}
	uid, _, _ := strings.Cut(imageUser, ":")
	if uid == "" {
		uid = "0" // an image without a user runs as root
	}
	n, err := strconv.ParseInt(uid, 10, 64)
	switch {
	case err != nil:
		return &ConfigError{fmt.Sprintf("container has runAsNonRoot and image has non-numeric user (%s), cannot verify user is non-root (pod: %q, container: %s)", uid, pod, container)}
	case n == 0:
		return &ConfigError{fmt.Sprintf("container has runAsNonRoot and image will run as root (pod: %q, container: %s)", pod, container)}
	}
	return nil
}

package runtime

import (
	"context"
	"fmt"

	containerd "github.com/containerd/containerd/v2/client"
	"github.com/containerd/containerd/v2/core/remotes/docker"
	"github.com/containerd/containerd/v2/core/remotes/docker/config"
	"github.com/distribution/reference"
	"go.opentelemetry.io/otel/attribute"
)

// NormalizeImage turns a pod's image into the full reference containerd stores
// ("nginx" -> "docker.io/library/nginx:latest"), as the kubelet does.
func NormalizeImage(image string) (string, error) {
	named, err := reference.ParseDockerRef(image)
	if err != nil {
		return "", fmt.Errorf("image %q: %w", image, err)
	}
	return named.String(), nil
}

// HasImage reports whether the image is already in this node's containerd.
func (r *Runtime) HasImage(ctx context.Context, image string) bool {
	ref, err := NormalizeImage(image)
	if err != nil {
		return false
	}
	_, err = r.client.GetImage(r.ctx(ctx), ref)
	return err == nil
}

// Pull fetches an image from its registry and unpacks it for pods. Registries on localhost
// are spoken to over plain HTTP, as containerd does by default.
func (r *Runtime) Pull(ctx context.Context, image string) (err error) {
	ctx, end := op(ctx, "pull image", attribute.String("container.image.name", image))
	defer end(&err)
	ref, err := NormalizeImage(image)
	if err != nil {
		return err
	}
	// As containerd's own resolver: localhost over plain HTTP, other hosts over HTTPS, both as
	// the registry's hosts.toml says when there is one.
	hosts := config.HostOptions{}
	if r.o.RegistryConfigDir != "" {
		hosts.HostDir = config.HostDirFromRoot(r.o.RegistryConfigDir)
	}
	resolver := docker.NewResolver(docker.ResolverOptions{Hosts: config.ConfigureHosts(ctx, hosts)})
	if _, err := r.client.Pull(r.ctx(ctx), ref, containerd.WithPullUnpack, containerd.WithPullSnapshotter(snapshotter),
		containerd.WithResolver(resolver)); err != nil {
		return fmt.Errorf("pull %s: %w", ref, err)
	}
	return nil
}

package nodebin

import (
	"context"

	"github.com/containerd/containerd/v2/cmd/containerd-shim-runc-v2/manager"
	_ "github.com/containerd/containerd/v2/cmd/containerd-shim-runc-v2/task/plugin"
	"github.com/containerd/containerd/v2/pkg/shim"
	"github.com/containerd/containerd/v2/plugins"
	"github.com/containerd/plugin"
)

// shimMain is containerd-shim-runc-v2, the shim containerd starts per pod sandbox to run runc.
func shimMain() int {
	keepPlugins(isShimPlugin)
	shim.RunShim(context.Background(), manager.NewShimManager("io.containerd.runc.v2"))
	return 0
}

// isShimPlugin tells the runc shim's task service (registered by its task/plugin package)
// from the daemon's plugins.
func isShimPlugin(r *plugin.Registration) bool {
	return r.Type == plugins.TTRPCPlugin && r.ID == "task"
}

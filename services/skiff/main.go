// Command skiff is Skiff's single binary: the control plane (`up`, `server`) and the CLI
// (`apply`, `get`, `delete`, `describe`, ...).
package main

import (
	"fmt"
	"os"

	"github.com/spf13/cobra"

	"github.com/skiff-sh/skiff/internal/nodebin"
)

func main() {
	nodebin.Run() // started as containerd, its shim or a CNI plugin: runs that and exits
	if err := newRoot().Execute(); err != nil {
		fmt.Fprintln(os.Stderr, "error:", err)
		os.Exit(1)
	}
}

// globals are the flags every client command shares.
type globals struct {
	server     string
	serverSet  bool // --server or SKIFF_SERVER given: overrides the kubeconfig's
	namespace  string
	token      string
	kubeconfig string
	insecure   bool
	conn       connection // resolved on first use (client.go)
}

func newRoot() *cobra.Command {
	g := &globals{}
	root := &cobra.Command{
		Use:           "skiff",
		Short:         "Skiff: a container orchestrator on NATS JetStream, Proto.Actor and eBPF",
		SilenceUsage:  true,
		SilenceErrors: true,
	}
	def := os.Getenv("SKIFF_SERVER")
	g.serverSet = def != ""
	if def == "" {
		def = defaultServer
	}
	root.PersistentFlags().StringVar(&g.server, "server", def, "apiserver URL (env SKIFF_SERVER); overrides the kubeconfig's")
	root.PersistentPreRun = func(*cobra.Command, []string) {
		g.serverSet = g.serverSet || root.PersistentFlags().Changed("server")
	}
	root.PersistentFlags().StringVar(&g.kubeconfig, "kubeconfig", "", "kubeconfig `FILE` (default $KUBECONFIG, else the one skiff up wrote into its data dir)")
	root.PersistentFlags().BoolVar(&g.insecure, "insecure-skip-tls-verify", false, "do not check the server's certificate (insecure)")
	root.PersistentFlags().StringVarP(&g.namespace, "namespace", "n", "default", "namespace")
	root.PersistentFlags().StringVar(&g.token, "token", os.Getenv("SKIFF_TOKEN"), "bearer token (env SKIFF_TOKEN); replaces the kubeconfig's credentials")
	root.AddCommand(newUp(), newApply(g), newGet(g), newDelete(g), newDescribe(g), newKubeconfig(g), newVersion(g),
		newScale(g), newRollout(g), newEvents(g), newProxy(g), newPolicy(g), newAgent(), newDNS(), newSim(g), newLogs(g), newExec(g), newImage(), newTrace(g), newServer(), newNATS(), newNATSCreds(), newClusterCreds())
	return root
}

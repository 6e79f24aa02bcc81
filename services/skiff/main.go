// Command skiff is Skiff's single binary: the control plane (`up`, `server`) and the CLI
// (`apply`, `get`, `delete`, `describe`, ...).
package main

import (
	"fmt"
	"os"

	"github.com/spf13/cobra"
)

func main() {
	if err := newRoot().Execute(); err != nil {
		fmt.Fprintln(os.Stderr, "error:", err)
		os.Exit(1)
	}
}

// globals are the flags every client command shares.
type globals struct {
	server    string
	namespace string
	token     string
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
	if def == "" {
		def = "http://127.0.0.1:6443"
	}
	root.PersistentFlags().StringVar(&g.server, "server", def, "apiserver URL (env SKIFF_SERVER)")
	root.PersistentFlags().StringVarP(&g.namespace, "namespace", "n", "default", "namespace")
	root.PersistentFlags().StringVar(&g.token, "token", os.Getenv("SKIFF_TOKEN"), "bearer token (env SKIFF_TOKEN)")
	root.AddCommand(newUp(), newApply(g), newGet(g), newDelete(g), newDescribe(g), newKubeconfig(g), newVersion(g),
		newScale(g), newRollout(g), newEvents(g), newProxy(g), newAgent(), newSim(), newLogs(g), newExec(g), newImage())
	return root
}

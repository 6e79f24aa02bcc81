package main

import (
	"fmt"
	"path/filepath"

	"github.com/containerd/containerd/v2/client"
	"github.com/containerd/containerd/v2/pkg/namespaces"
	"github.com/spf13/cobra"

	kruntime "github.com/skiff-sh/skiff/actors/kubelet/runtime"
)

func newImage() *cobra.Command {
	img := &cobra.Command{Use: "image", Short: "Node images (no registry needed)"}
	var dataDir, socket, namespace string
	load := &cobra.Command{
		Use:   "load FILE...",
		Short: "Import OCI or docker-save tarballs into this node's containerd (run on the node, as root)",
		Args:  cobra.MinimumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if socket == "" {
				socket = filepath.Join(dataDir, "node", "containerd", "containerd.sock")
			}
			c, err := client.New(socket)
			if err != nil {
				return fmt.Errorf("containerd at %s: %w", socket, err)
			}
			defer c.Close()
			ctx := namespaces.WithNamespace(cmd.Context(), namespace)
			for _, f := range args {
				names, err := kruntime.Import(ctx, c, f)
				if err != nil {
					return err
				}
				for _, n := range names {
					fmt.Fprintf(cmd.OutOrStdout(), "loaded %s\n", n)
				}
			}
			return nil
		},
	}
	load.Flags().StringVar(&dataDir, "data-dir", defaultDataDir(), "the node's data dir (its containerd socket lives under it)")
	load.Flags().StringVar(&socket, "containerd-socket", "", "containerd socket (default: the one skiff started under --data-dir)")
	load.Flags().StringVar(&namespace, "containerd-namespace", "skiff", "containerd namespace the node uses")
	img.AddCommand(load)
	return img
}

package main

import (
	"os"

	"github.com/spf13/cobra"
)

// dumpCmd is a "dump" subcommand reading maps an agent pinned on this node: the directory
// is --pin-dir, or defaultDir of --node (default: the hostname).
func dumpCmd(short, what string, defaultDir func(node string) string, dump func(cmd *cobra.Command, dir string) error) *cobra.Command {
	var node, pinDir string
	cmd := &cobra.Command{
		Use:   "dump",
		Short: short,
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			dir := pinDir
			if dir == "" {
				if node == "" {
					host, err := os.Hostname()
					if err != nil {
						return err
					}
					node = host
				}
				dir = defaultDir(node)
			}
			return dump(cmd, dir)
		},
	}
	cmd.Flags().StringVar(&node, "node", "", "node name (default: the hostname)")
	cmd.Flags().StringVar(&pinDir, "pin-dir", "", "bpffs directory of the "+what+" (default "+defaultDir("<node>")+")")
	return cmd
}

package main

import (
	"fmt"

	"github.com/spf13/cobra"
)

// kubeconfigFor is a kubeconfig for stock kubectl and client-go pointing at Skiff.
func kubeconfigFor(server, token string) string {
	user := "{}"
	if token != "" {
		user = fmt.Sprintf("{token: %q}", token)
	}
	return fmt.Sprintf(`apiVersion: v1
kind: Config
clusters:
- name: skiff
  cluster:
    server: %s
users:
- name: admin
  user: %s
contexts:
- name: skiff
  context:
    cluster: skiff
    user: admin
    namespace: default
current-context: skiff
`, server, user)
}

func newKubeconfig(g *globals) *cobra.Command {
	return &cobra.Command{
		Use:   "kubeconfig",
		Short: "Print a kubeconfig for kubectl pointing at this Skiff",
		RunE: func(cmd *cobra.Command, _ []string) error {
			_, err := fmt.Fprint(cmd.OutOrStdout(), kubeconfigFor(g.server, g.token))
			return err
		},
	}
}

func newVersion(g *globals) *cobra.Command {
	return &cobra.Command{
		Use:   "version",
		Short: "Print the server's version",
		RunE: func(cmd *cobra.Command, _ []string) error {
			out, err := g.client().Raw(cmd.Context(), "GET", "/version", "", nil)
			if err != nil {
				return err
			}
			_, err = fmt.Fprintf(cmd.OutOrStdout(), "%s", out)
			return err
		},
	}
}

package main

import (
	"errors"
	"fmt"
	"net"
	"net/url"
	"os"
	"path/filepath"

	"github.com/spf13/cobra"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"

	"github.com/skiff-sh/skiff/internal/pki"
)

// kubeconfigName is the admin kubeconfig `skiff up` writes into its data directory.
const kubeconfigName = "kubeconfig"

// adminKubeconfig is a kubeconfig for stock kubectl and client-go: the server, the CA that
// signed its certificate, and the admin client certificate (nil b: plain HTTP, no credentials).
func adminKubeconfig(server string, b *pki.Bundle) ([]byte, error) {
	cfg := clientcmdapi.NewConfig()
	cluster := clientcmdapi.NewCluster()
	cluster.Server = dialable(server)
	user := clientcmdapi.NewAuthInfo()
	if b != nil {
		cluster.CertificateAuthorityData = b.CAPEM
		user.ClientCertificateData, user.ClientKeyData = b.AdminCertPEM, b.AdminKeyPEM
	}
	cfg.Clusters["skiff"] = cluster
	cfg.AuthInfos["admin"] = user
	ctx := clientcmdapi.NewContext()
	ctx.Cluster, ctx.AuthInfo, ctx.Namespace = "skiff", "admin", "default"
	cfg.Contexts["skiff"] = ctx
	cfg.CurrentContext = "skiff"
	return clientcmd.Write(*cfg)
}

// writeKubeconfig writes the admin kubeconfig under dataDir (0600: it holds the admin key).
func writeKubeconfig(dataDir, server string, b *pki.Bundle) (string, error) {
	data, err := adminKubeconfig(server, b)
	if err != nil {
		return "", err
	}
	path := filepath.Join(dataDir, kubeconfigName)
	return path, pki.WriteFileAtomic(path, data, 0o600)
}

// dialable replaces a wildcard listen address (0.0.0.0, ::) by loopback, which clients can dial
// and the serving certificate covers.
func dialable(server string) string {
	u, err := url.Parse(server)
	if err != nil {
		return server
	}
	if ip := net.ParseIP(u.Hostname()); ip != nil && ip.IsUnspecified() {
		u.Host = net.JoinHostPort("127.0.0.1", u.Port())
	}
	return u.String()
}

func newKubeconfig(g *globals) *cobra.Command {
	dataDir := defaultDataDir()
	cmd := &cobra.Command{
		Use:   "kubeconfig",
		Short: "Print the admin kubeconfig of the control plane in --data-dir (for kubectl)",
		RunE: func(cmd *cobra.Command, _ []string) error {
			path := filepath.Join(dataDir, kubeconfigName)
			cfg, err := clientcmd.LoadFromFile(path)
			if errors.Is(err, os.ErrNotExist) {
				return fmt.Errorf("no kubeconfig in %s: it is written by `skiff up --data-dir %s`", dataDir, dataDir)
			}
			if err != nil {
				return fmt.Errorf("%s: %w", path, err)
			}
			// --server points the printed kubeconfig elsewhere (another address of the same server).
			if cmd.Flags().Changed("server") {
				for _, c := range cfg.Clusters {
					c.Server = g.server
				}
			}
			data, err := clientcmd.Write(*cfg)
			if err != nil {
				return err
			}
			_, err = cmd.OutOrStdout().Write(data)
			return err
		},
	}
	cmd.Flags().StringVar(&dataDir, "data-dir", dataDir, "the control plane's data directory")
	return cmd
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

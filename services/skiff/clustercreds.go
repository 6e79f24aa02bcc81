package main

import (
	"fmt"
	"path/filepath"

	"github.com/spf13/cobra"

	"github.com/skiff-sh/skiff/actors/apiserver/authn"
	"github.com/skiff-sh/skiff/actors/controlplane"
	"github.com/skiff-sh/skiff/bus/identity"
	"github.com/skiff-sh/skiff/bus/natsserver"
	"github.com/skiff-sh/skiff/internal/pki"
)

// clusterCreds is what one multi-process cluster shares: made once, before any server starts,
// so every NATS server, apiserver replica and node agent is handed its part. In one directory:
// the NATS keys (controlplane.NATSKeysDir, for `skiff nats --auth-dir`), a credentials file per
// component and node, the API's certificates (controlplane.TLSDir, for `skiff server
// --tls-dir`), the token file and the admin kubeconfig.
type clusterCreds struct {
	dir, server string
	nodes, sans []string
}

// write makes what is missing under dir and keeps what exists (keys, CA, tokens), so running it
// again, say for a new node, leaves every credential already handed out valid.
func (c clusterCreds) write() error {
	auth, err := natsserver.LoadAuth(filepath.Join(c.dir, controlplane.NATSKeysDir))
	if err != nil {
		return fmt.Errorf("NATS keys: %w", err)
	}
	ids := []identity.ID{{Role: identity.APIServer}, {Role: identity.Scheduler}, {Role: identity.ControllerManager}, {Role: identity.Admin}}
	for _, n := range c.nodes {
		ids = append(ids, identity.NodeID(n))
	}
	for _, id := range ids {
		if err := id.Validate(); err != nil {
			return fmt.Errorf("--node %q: %w", id.Node, err)
		}
		creds, err := identity.Creds(auth, id, identity.Names{})
		if err != nil {
			return err
		}
		if err := pki.WriteFileAtomic(filepath.Join(c.dir, credsFileName(id)), creds, 0o600); err != nil {
			return err
		}
	}
	bundle, err := pki.Ensure(filepath.Join(c.dir, controlplane.TLSDir), c.sans)
	if err != nil {
		return fmt.Errorf("certificates: %w", err)
	}
	if _, err := authn.EnsureTokenFile(filepath.Join(c.dir, controlplane.TokenFile)); err != nil {
		return fmt.Errorf("tokens: %w", err)
	}
	_, err = writeKubeconfig(c.dir, c.server, bundle)
	return err
}

// credsFileName is a component's credentials file: apiserver.creds, node-NAME.creds, ...
func credsFileName(id identity.ID) string {
	if id.Role == identity.Node {
		return "node-" + id.Node + ".creds"
	}
	return string(id.Role) + ".creds"
}

func newClusterCreds() *cobra.Command {
	c := clusterCreds{}
	cmd := &cobra.Command{
		Use:   "cluster-creds",
		Short: "Make every credential of a multi-process cluster in one directory: NATS keys and per-component credentials, the API's CA and certificates, tokens, the admin kubeconfig",
		Long: `Run once before the cluster's processes start (the compose stack runs it as its init service);
again to add nodes: what exists is kept. Then:
  skiff nats --auth-dir DIR/` + controlplane.NATSKeysDir + `
  skiff server --nats-creds DIR/apiserver.creds --api-auth --tls-dir DIR/` + controlplane.TLSDir + ` --token-file DIR/` + controlplane.TokenFile + `
  skiff server --components scheduler --nats-creds DIR/scheduler.creds
  skiff agent --node-name n1 --nats-creds DIR/node-n1.creds
  KUBECONFIG=DIR/` + kubeconfigName + ` kubectl get nodes`,
		Args: cobra.NoArgs,
		RunE: func(*cobra.Command, []string) error {
			if c.dir == "" {
				return fmt.Errorf("--dir: required")
			}
			return c.write()
		},
	}
	f := cmd.Flags()
	f.StringVar(&c.dir, "dir", "", "where to write (made 0700)")
	f.StringSliceVar(&c.nodes, "node", nil, "node names to make agent credentials for (repeat or comma-separate)")
	f.StringSliceVar(&c.sans, "tls-san", nil, "host names or IPs the apiservers are reached at, beyond localhost")
	f.StringVar(&c.server, "server", defaultServer, "the API address the admin kubeconfig names")
	return cmd
}

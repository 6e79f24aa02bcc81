package main

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"

	"github.com/nats-io/nats.go"
	"github.com/spf13/cobra"

	"github.com/skiff-sh/skiff/actors/controlplane"
	"github.com/skiff-sh/skiff/bus/identity"
	"github.com/skiff-sh/skiff/bus/natsserver"
)

// secureEmbeddedNATS turns on NATS credentials whenever the embedded server listens on TCP:
// in-process callers are trusted, anything dialling the port must say who it is.
func secureEmbeddedNATS(cfg *controlplane.Config, on bool) {
	if on && cfg.NATSURL == "" && cfg.NATSPort != 0 && cfg.DataDir != "" && cfg.NATSAuthDir == "" {
		cfg.NATSAuthDir = filepath.Join(cfg.DataDir, controlplane.NATSKeysDir)
	}
}

// nodeConn is the connection the in-process node agent uses: its own NATS user when NATS is
// secured, else the control plane's.
func nodeConn(cp *controlplane.ControlPlane, node string) (*nats.Conn, error) {
	if !cp.Secured() {
		return cp.Conn, nil
	}
	return cp.ConnectNode(node)
}

// localAdmin is the admin's NATS identity for a tool run next to `skiff up` (its data dir is
// readable, as its admin kubeconfig is): minted from the keys there, or none when NATS is
// not secured.
func localAdmin(creds, dataDir string) (controlplane.NATSAuth, error) {
	a := controlplane.NATSAuth{Creds: creds, ID: identity.ID{Role: identity.Admin}}
	if creds != "" {
		return a, nil
	}
	dir := filepath.Join(dataDir, controlplane.NATSKeysDir)
	if _, err := os.Stat(dir); errors.Is(err, os.ErrNotExist) {
		return a, nil
	}
	auth, err := natsserver.ReadAuth(dir)
	if err != nil {
		return a, fmt.Errorf("--data-dir: %w", err)
	}
	p, err := a.ID.Permissions(identity.Names{})
	if err != nil {
		return a, err
	}
	a.User, err = auth.ConnectOption("admin", p)
	return a, err
}

func newNATSCreds() *cobra.Command {
	var dataDir, keysDir, node, role string
	cmd := &cobra.Command{
		Use:   "nats-creds",
		Short: "Print NATS credentials for a node agent (or another component) of a secured control plane",
		Long: "Mints a .creds file signed by the control plane's NATS account key (DATA_DIR/" + controlplane.NATSKeysDir + "). " +
			"The server needs no reload: `skiff nats-creds --node n1 > n1.creds; skiff agent --node-name n1 --nats-creds n1.creds`.",
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			id := identity.ID{Role: identity.Role(role)}
			if node != "" {
				if cmd.Flags().Changed("role") && role != string(identity.Node) {
					return fmt.Errorf("--node: only --role node has a node name")
				}
				id = identity.NodeID(node)
			} else if id.Role == identity.Node {
				return fmt.Errorf("--node: the node's name is required")
			}
			if err := id.Validate(); err != nil {
				return fmt.Errorf("--role/--node: %w", err)
			}
			flag, dir := "--keys-dir", keysDir
			if dir == "" {
				flag, dir = "--data-dir", filepath.Join(dataDir, controlplane.NATSKeysDir)
			}
			auth, err := natsserver.ReadAuth(dir)
			if err != nil {
				return fmt.Errorf("%s: no NATS keys (is the NATS server secured?): %w", flag, err)
			}
			creds, err := identity.Creds(auth, id, identity.Names{})
			if err != nil {
				return err
			}
			_, err = cmd.OutOrStdout().Write(creds)
			return err
		},
	}
	f := cmd.Flags()
	f.StringVar(&dataDir, "data-dir", defaultDataDir(), "the control plane's data directory")
	f.StringVar(&keysDir, "keys-dir", "", "the NATS keys directory itself (default DATA_DIR/"+controlplane.NATSKeysDir+"), e.g. a skiff nats server's")
	f.StringVar(&node, "node", "", "node name: credentials to read the log, call the API as system:node:NAME and serve its logs/exec")
	f.StringVar(&role, "role", string(identity.Node), "component: node, scheduler, controller-manager, admin, apiserver")
	return cmd
}

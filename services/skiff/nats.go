package main

import (
	"fmt"
	"net"
	"os"
	"os/signal"
	"strconv"
	"syscall"

	"github.com/spf13/cobra"

	"github.com/skiff-sh/skiff/actors/controlplane"
	"github.com/skiff-sh/skiff/bus/natsserver"
)

type natsFlags struct {
	name, listen, clusterListen, clusterName, dataDir, authDir string
	routes                                                     []string
	syncAlways                                                 bool
}

func newNATS() *cobra.Command {
	var fl natsFlags
	cmd := &cobra.Command{
		Use:   "nats",
		Short: "Run a NATS JetStream server: alone, or one member of the cluster that holds Skiff's state",
		Example: `  skiff nats --name n1 --listen 0.0.0.0:4222 --cluster-listen 0.0.0.0:6222 \
    --routes nats://nats2:6222,nats://nats3:6222 --cluster-name skiff --data-dir /data`,
		RunE: func(cmd *cobra.Command, _ []string) error {
			cfg, err := fl.config()
			if err != nil {
				return err
			}
			ctx, stop := signal.NotifyContext(cmd.Context(), os.Interrupt, syscall.SIGTERM)
			defer stop()
			if cfg.DataDir != "" {
				unlock, err := controlplane.LockDataDir(cfg.DataDir)
				if err != nil {
					return fmt.Errorf("--data-dir: %w", err)
				}
				defer unlock() // deferred before Shutdown: runs after it closed the store
			}
			srv, err := natsserver.Start(cfg)
			if err != nil {
				return err
			}
			defer srv.Shutdown()
			fmt.Fprintf(os.Stderr, "skiff nats %s is up: clients %s, cluster %q routes %s\n", cfg.ServerName, srv.ClientURL(), cfg.Cluster.Name, srv.ClusterURL())
			<-ctx.Done()
			fmt.Fprintln(os.Stderr, "skiff nats: shutting down")
			return nil
		},
	}
	host, _ := os.Hostname()
	f := cmd.Flags()
	f.StringVar(&fl.name, "name", host, "server name, unique in the cluster")
	f.StringVar(&fl.listen, "listen", "0.0.0.0:4222", "client address")
	f.StringVar(&fl.clusterListen, "cluster-listen", "", "route address for the other servers of the cluster (empty = standalone)")
	f.StringSliceVar(&fl.routes, "routes", nil, "the other servers' route URLs (nats://host:port, comma-separated; listing this server too is fine)")
	f.StringVar(&fl.clusterName, "cluster-name", "skiff", "cluster name, the same on every server")
	f.StringVar(&fl.dataDir, "data-dir", defaultDataDir()+"-nats", "JetStream store")
	f.BoolVar(&fl.syncAlways, "sync-always", true, "fsync every write before acknowledging it (nats-server's sync_always); false: sync every 2 minutes, "+
		"so a power cut of this server loses what it acknowledged since (at R3 a write is still on a quorum of servers when acknowledged)")
	f.StringVar(&fl.authDir, "auth-dir", "", "secure the server with the NATS keys here (made on first use; the same keys on every server of the cluster; "+
		"credentials: skiff nats-creds --keys-dir DIR --role ROLE)")
	return cmd
}

func (fl natsFlags) config() (natsserver.Config, error) {
	host, port, err := splitHostPort("--listen", fl.listen)
	if err != nil {
		return natsserver.Config{}, err
	}
	cfg := natsserver.Config{ServerName: fl.name, Host: host, Port: port, DataDir: fl.dataDir, Log: true, SyncAlways: fl.syncAlways}
	if fl.name == "" {
		return cfg, fmt.Errorf("--name: required")
	}
	if fl.authDir != "" {
		if cfg.Auth, err = natsserver.LoadAuth(fl.authDir); err != nil {
			return cfg, fmt.Errorf("--auth-dir: %w", err)
		}
	}
	if fl.clusterListen == "" {
		if len(fl.routes) > 0 {
			return cfg, fmt.Errorf("--routes: needs --cluster-listen")
		}
		return cfg, nil
	}
	if fl.clusterName == "" {
		return cfg, fmt.Errorf("--cluster-name: required with --cluster-listen")
	}
	chost, cport, err := splitHostPort("--cluster-listen", fl.clusterListen)
	if err != nil {
		return cfg, err
	}
	cfg.Cluster = natsserver.ClusterConfig{Name: fl.clusterName, Host: chost, Port: cport, Routes: fl.routes}
	return cfg, nil
}

func splitHostPort(flag, addr string) (string, int, error) {
	host, p, err := net.SplitHostPort(addr)
	if err != nil {
		return "", 0, fmt.Errorf("%s %q: %w", flag, addr, err)
	}
	port, err := strconv.Atoi(p)
	if err != nil || port <= 0 || port > 65535 {
		return "", 0, fmt.Errorf("%s %q: port must be 1-65535", flag, addr)
	}
	if host == "" {
		host = "0.0.0.0"
	}
	return host, port, nil
}

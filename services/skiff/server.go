package main

import (
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/skiff-sh/skiff/actors/apiserver"
	"github.com/skiff-sh/skiff/actors/controlplane"
)

// controlPlaneFlags are the flags `skiff up` and `skiff server` share; flags for every
// control-plane process (metrics, auth) belong here.
func controlPlaneFlags(f *pflag.FlagSet, cfg *controlplane.Config, node *nodeFlags, listen string) {
	f.StringVar(&node.otlpEndpoint, "otlp-endpoint", "", "export traces over OTLP/HTTP here (standard OTEL_* variables are honoured too)")
	node.metricsFlag(f)
	f.StringVar(&cfg.DataDir, "data-dir", defaultDataDir(), "where the state log (JetStream store) and the kubeconfig live")
	f.StringVar(&cfg.Listen, "listen", listen, "apiserver address")
	f.StringVar(&cfg.NATSURL, "nats-url", "", "use this NATS (JetStream) cluster instead of the embedded server (comma-separated URLs)")
	f.IntVar(&cfg.NATSPort, "nats-port", 4222, "embedded NATS client port (0 = in-process only)")
	f.IntVar(&cfg.Replicas, "replicas", 1, "replicas of the state stream and the lease bucket (3 on a NATS cluster)")
	f.StringVar(&cfg.ServiceCIDR, "service-cidr", "10.96.0.0/16", "ClusterIP range")
	f.StringVar(&cfg.NodePortRange, "service-node-port-range", apiserver.DefaultNodePortRange, "ports (LOW-HIGH, inclusive) NodePort and LoadBalancer Services are given on every node")
	f.DurationVar(&cfg.CompactEvery, "compact-every", 5*time.Minute, "how often old history is compacted")
	f.DurationVar(&cfg.CompactKeep, "compact-keep", 5*time.Minute, "how much history watches can resume from")
	f.StringVar(&cfg.EncryptionKeyFile, "encryption-key-file", "", "keys that seal Secrets in the state log, made on first start (default DATA_DIR/"+controlplane.EncryptionKeyFileName+"); required with --nats-url: every apiserver replica is given the same file")
	f.StringVar(&cfg.ServiceAccountIssuer, "service-account-issuer", "", "issuer (iss) of ServiceAccount tokens and the OIDC discovery URL (default https://kubernetes.default.svc.cluster.local)")
	f.StringVar(&cfg.ServiceAccountKeyFile, "service-account-key-file", "", "ES256 key that signs ServiceAccount tokens, made on first start (default DATA_DIR/service-account.key; with --nats-url beside --encryption-key-file, so the apiserver replicas share it)")
	f.BoolVar(&cfg.ServiceAccountAdmission, "service-account-admission", true, "pods without serviceAccountName run as 'default'; a pod naming a missing ServiceAccount is refused (kube's ServiceAccount admission)")
	f.BoolVar(&cfg.AutomountServiceAccountTokens, "automount-service-account-tokens", false, "with --service-account-admission: add the kube-api-access-* token volume to pods that do not opt out "+
		"(default: on with --api-auth; off without it, where the apiserver has no token issuer)")
	f.StringVar(&cfg.AdvertiseAddress, "advertise-address", "", "IPv4 address pods reach this apiserver at, listed in the endpoints of the 'kubernetes' Service (default: the --listen IP when specific, else the host's default-route address)")
	f.StringVar(&cfg.RootCAFile, "root-ca-file", "", "CA (PEM) the controller-manager publishes as kube-root-ca.crt (default: this process's API CA, when it serves the API with --api-auth)")
	f.BoolVar(&cfg.APIAuth.Enabled, "api-auth", false, "serve the API over HTTPS with authentication and RBAC (certificates and tokens.csv under --data-dir)")
	f.StringSliceVar(&cfg.APIAuth.SANs, "tls-san", nil, "extra host names or IPs of the API's serving certificate")
	f.StringVar(&cfg.APIAuth.TLSDir, "tls-dir", "", "with --api-auth: read the CA and serving certificate here, made by 'skiff cluster-creds' and shared by the replicas (default: made under DATA_DIR/"+controlplane.TLSDir+")")
	f.StringVar(&cfg.APIAuth.TokenFile, "token-file", "", "with --api-auth: the static token file (default: made as DATA_DIR/"+controlplane.TokenFile+")")
	f.Var(negatedBool{&cfg.NoFsync}, "fsync", "embedded NATS: fsync every write before acknowledging it, concurrent writes sharing one fsync; "+
		"false: JetStream syncs every 2 minutes and a power cut loses what was acknowledged since (an external NATS syncs by its own setting: skiff nats --sync-always)")
	f.Lookup("fsync").NoOptDefVal = "true"
	f.Float64Var(&cfg.APIAuth.ClientQPS, "client-qps", apiserver.DefaultClientQPS, "requests per second each user may make (system:masters, the scheduler, the controller-manager and node heartbeats exempt; negative = no limit)")
	f.IntVar(&cfg.APIAuth.ClientBurst, "client-burst", 0, "burst above --client-qps (default: twice the QPS)")
	f.IntVar(&cfg.APIAuth.ClientInflight, "client-inflight", apiserver.DefaultClientInflight, "requests each user may have in flight, watches and streams not counted (negative = no limit)")
	f.DurationVar(&cfg.APITimeouts.BodyRead, "body-read-timeout", apiserver.DefaultBodyReadTimeout, "a request body must arrive within this, else 408 and the connection is closed")
}

// negatedBool is a bool flag that sets the opposite field (--fsync sets NoFsync).
type negatedBool struct{ p *bool }

func (n negatedBool) String() string {
	if n.p == nil {
		return "true"
	}
	return strconv.FormatBool(!*n.p)
}

func (n negatedBool) Set(s string) error {
	v, err := strconv.ParseBool(s)
	if err == nil {
		*n.p = !v
	}
	return err
}

func (negatedBool) Type() string { return "bool" }

func newServer() *cobra.Command {
	cfg := controlplane.Config{}
	node := nodeFlags{} // tracing only: `skiff server` runs no node agent
	var components []string
	cmd := &cobra.Command{
		Use:   "server",
		Short: "Run control-plane components (apiserver, scheduler, controller-manager), leader-elected, on a NATS JetStream cluster",
		Long: `Run the control plane, or some of its components, against a NATS JetStream cluster
(--nats-url) or an embedded server. Run as many replicas as you like: apiserver replicas
share the load; the scheduler and the controller-manager run only in the replica holding
their lease in JetStream, and a standby takes over within --lease-duration.`,
		Example: `  skiff server --nats-url nats://nats1:4222,nats://nats2:4222,nats://nats3:4222 --replicas 3
  skiff server --nats-url nats://nats1:4222 --components scheduler,controller-manager`,
		RunE: func(cmd *cobra.Command, _ []string) error {
			cfg.Components = components
			if err := checkServerFlags(cmd.Flags(), &cfg); err != nil {
				return err
			}
			return runControlPlane(cmd.Context(), cfg, &node)
		},
	}
	f := cmd.Flags()
	controlPlaneFlags(f, &cfg, &node, "0.0.0.0:6443")
	f.StringSliceVar(&components, "components", []string{controlplane.APIServer, controlplane.Scheduler, controlplane.ControllerManager},
		"what this process runs: "+strings.Join(controlplane.Components(), ", "))
	f.BoolVar(&cfg.LeaderElect, "leader-elect", true, "run the scheduler and the controller-manager only while holding their lease")
	f.DurationVar(&cfg.LeaseDuration, "lease-duration", controlplane.DefaultLeaseDuration, "how long a dead leader's lease blocks its standby")
	f.StringVar(&cfg.Identity, "identity", "", "this replica's name in leases (default: hostname and a random suffix)")
	f.StringVar(&cfg.NATSCreds, "nats-creds", "", "credentials file for --nats-url")
	return cmd
}

func checkServerFlags(f *pflag.FlagSet, cfg *controlplane.Config) error {
	if err := automountFlag(f, cfg); err != nil {
		return err
	}
	if len(cfg.Components) == 0 {
		return fmt.Errorf("--components: name at least one of %s", strings.Join(controlplane.Components(), ", "))
	}
	if f.Changed("listen") && cfg.Listen != "" && !slices.Contains(cfg.Components, controlplane.APIServer) {
		return fmt.Errorf("--listen %s: this process serves no API (--components has no %s)", cfg.Listen, controlplane.APIServer)
	}
	if f.Changed("encryption-key-file") && !slices.Contains(cfg.Components, controlplane.APIServer) {
		return fmt.Errorf("--encryption-key-file: only the apiserver holds the Secrets key (--components has no %s)", controlplane.APIServer)
	}
	if cfg.LeaseDuration < time.Second {
		return fmt.Errorf("--lease-duration %v: must be at least 1s", cfg.LeaseDuration)
	}
	return nil
}

// automountFlag makes --automount-service-account-tokens follow --api-auth unless given, and
// refuses it on an apiserver without API auth: the volume's token comes from the TokenRequest
// API, which only an apiserver with a service account issuer serves, so every pod would wait.
func automountFlag(f *pflag.FlagSet, cfg *controlplane.Config) error {
	if !f.Changed("automount-service-account-tokens") {
		cfg.AutomountServiceAccountTokens = cfg.APIAuth.Enabled
		return nil
	}
	if cfg.AutomountServiceAccountTokens && !cfg.APIAuth.Enabled && cfg.Runs(controlplane.APIServer) {
		return errors.New("--automount-service-account-tokens: needs --api-auth (without it the apiserver issues no ServiceAccount tokens)")
	}
	return nil
}

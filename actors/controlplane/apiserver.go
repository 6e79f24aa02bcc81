package controlplane

import (
	"context"
	"errors"
	"fmt"
	"net"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/skiff-sh/skiff/actors/apiclient"
	"github.com/skiff-sh/skiff/actors/apiserver"
	"github.com/skiff-sh/skiff/bus/identity"
)

// newAPIServer builds the apiserver (cp.API) this process runs; startAPIServer serves it.
func (cp *ControlPlane) newAPIServer() error {
	cfg := cp.cfg
	opts, err := cp.apiOptions(apiserver.Options{Log: cp.Log, ServiceCIDR: cfg.ServiceCIDR, NodePortRange: cfg.NodePortRange, NodeConn: cp.Conn,
		Health: cp.Actors.Health().Check, Ready: cp.writable, Timeouts: cfg.APITimeouts, ServiceAccountAdmission: cfg.serviceAccountAdmission(),
		CheckSharedMutations: cfg.CheckCacheMutations})
	if err != nil {
		return err
	}
	if cp.API, err = apiserver.New(opts); err != nil {
		return err
	}
	// One decode per write for the informers and the apiserver's watchers and update path.
	cp.Informers.ShareDecodes(cp.API)
	return nil
}

// apiTransport is how this process's components reach the API as id. With the apiserver in
// this process they call it in process (apiclient.Direct): the same identity and handler
// chain as over NATS, without the hops through the NATS server and the envelope's encoding;
// while it does not serve, over conn (if any) to another replica, as before. Without the
// apiserver here, over NATS through conn, to whichever replica answers.
func (cp *ControlPlane) apiTransport(conn *nats.Conn, id identity.ID) apiclient.Transport {
	var overNATS apiclient.Transport
	if conn != nil {
		overNATS = apiclient.NATS{Conn: conn, Subject: id.APISubject()}
	}
	if cp.API != nil {
		return apiclient.Direct{Server: cp.API, Subject: id.APISubject(), Fallback: overNATS}
	}
	return overNATS
}

// startAPIServer serves the API over NATS (a queue group shared by every replica), HTTP and
// in process (apiTransport).
func (cp *ControlPlane) startAPIServer(ctx context.Context) (err error) {
	cfg := cp.cfg
	// Replicas starting together race on these creates; the loser sees AlreadyExists.
	if err := cp.API.EnsureDefaultNamespaces(ctx); err != nil {
		return fmt.Errorf("default namespaces: %w", err)
	}
	if err := cp.API.EnsureDefaultStorageClass(ctx); err != nil {
		return fmt.Errorf("default storage class: %w", err)
	}
	if err := cp.startRBAC(ctx); err != nil {
		return err
	}
	if cfg.Listen != "" {
		if cp.listener, err = net.Listen("tcp", cfg.Listen); err != nil {
			return fmt.Errorf("apiserver listen: %w", err)
		}
	}
	if err := cp.spawn(APIServer, apiserver.NewActor(apiserver.ActorConfig{
		Server: cp.API, Listener: cp.listener, TLS: cp.serverTLS(), NATS: cp.Conn, Logger: cfg.Logger,
	})); err != nil {
		return err
	}

	if cfg.CompactEvery > 0 {
		return cp.run(elected{leaseName: CompactorLease, loop: cp.compactLoop})
	}
	return nil
}

func (cp *ControlPlane) waitReady(ctx context.Context) error {
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	for {
		_, err := cp.Client.Raw(ctx, "GET", "/api/v1/namespaces/default", "", nil)
		if err == nil {
			return nil
		}
		select {
		case <-ctx.Done():
			return errors.Join(errors.New("apiserver did not become ready"), err)
		case <-time.After(20 * time.Millisecond):
		}
	}
}

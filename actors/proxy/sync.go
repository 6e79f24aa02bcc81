package proxy

import (
	"context"
	"errors"
	"maps"
	"slices"

	corev1 "k8s.io/api/core/v1"

	"github.com/skiff-sh/skiff/bpf/lb"
	"github.com/skiff-sh/skiff/bpf/nodeport"
)

// resync makes the kernel maps equal to the caches, touching only the
// Service ports that differ from what Dump reads: after a restart of the
// proxy nothing is rewritten unless something changed meanwhile.
func (p *Proxy) resync(dp *lb.Dataplane, np *nodeport.Dataplane) error {
	var errs []error
	want := map[lb.ServiceKey]lb.ServiceSpec{}
	owner := map[lb.ServiceKey]string{}
	owned := map[string][]lb.ServiceKey{}
	wantExt := map[nodeport.Key][]nodeport.Backend{}
	ownerExt := map[nodeport.Key]string{}
	add := func(key string, sock map[lb.ServiceKey]lb.ServiceSpec, tc map[nodeport.Key][]nodeport.Backend) {
		for k, s := range sock {
			want[k], owner[k] = s, key
			owned[key] = append(owned[key], k)
		}
		for k, bs := range tc {
			wantExt[k], ownerExt[k] = bs, key
		}
	}
	for _, o := range p.svcs.List(nil) {
		svc := o.(*corev1.Service)
		key := keyOf(svc.Namespace, svc.Name)
		sock, tc := p.desired(svc)
		if np != nil {
			port, local := healthCheckOf(svc, tc)
			errs = append(errs, p.healthChecks().set(key, port, local))
		}
		add(key, sock, tc)
	}
	for _, pod := range p.hostPortPods() {
		sock, tc := HostPorts(pod, p.cfg.NodeIPs)
		add(podKey(pod), sock, tc)
	}
	have, err := dp.Dump()
	if err != nil {
		return err
	}
	var st Stats
	seen := map[lb.ServiceKey]bool{}
	for _, h := range have {
		seen[h.Key] = true
		w, ok := want[h.Key]
		switch {
		case !ok:
			if err := dp.Delete(h.Key); err != nil {
				errs = append(errs, err)
				continue
			}
			st.Deletes++
		case !sameSpec(w, h):
			errs = append(errs, p.upsert(dp, h.Key, w, &st))
		}
	}
	for k, w := range want {
		if !seen[k] {
			errs = append(errs, p.upsert(dp, k, w, &st))
		}
	}
	p.mu.Lock()
	p.owner, p.owned = owner, owned
	p.add(st)
	p.stats.Syncs++
	p.mu.Unlock()
	errs = append(errs, p.resyncExternal(np, wantExt, ownerExt))
	return errors.Join(errs...)
}

// sync reprograms one Service (namespace/name) or one pod's hostPorts (pod:namespace/name)
// from the caches.
func (p *Proxy) sync(ctx context.Context, dp *lb.Dataplane, np *nodeport.Dataplane, key string) error {
	svc, want, wantExt := p.desiredFor(key)
	p.mu.Lock()
	old := p.owned[key]
	p.mu.Unlock()

	var st Stats
	var errs []error
	for _, k := range old {
		if _, keep := want[k]; keep {
			continue
		}
		p.mu.Lock()
		mine := p.owner[k] == key // a port another Service took over is not ours to delete
		p.mu.Unlock()
		if !mine {
			continue
		}
		if err := dp.Delete(k); err != nil {
			errs = append(errs, err)
			continue
		}
		st.Deletes++
		p.mu.Lock()
		delete(p.owner, k)
		p.mu.Unlock()
	}
	keys := slices.SortedFunc(maps.Keys(want), compareKeys)
	for _, k := range keys {
		errs = append(errs, p.upsert(dp, k, want[k], &st))
	}
	p.mu.Lock()
	for _, k := range keys {
		p.owner[k] = key
	}
	if len(keys) == 0 {
		delete(p.owned, key)
	} else {
		p.owned[key] = keys
	}
	p.add(st)
	p.mu.Unlock()
	errs = append(errs, p.syncExternal(np, key, wantExt))
	if np != nil {
		port, local := healthCheckOf(svc, wantExt)
		errs = append(errs, p.healthChecks().set(key, port, local))
	}
	traceSync(ctx, want, st)
	return errors.Join(errs...)
}

// upsert programs one Service port and, when a UDP Service lost backends,
// aborts connected sockets of local pods still pinned to them.
func (p *Proxy) upsert(dp *lb.Dataplane, k lb.ServiceKey, s lb.ServiceSpec, st *Stats) error {
	ls, err := dp.Upsert(k, s)
	st.ServiceWrites += ls.ServiceWrites
	st.BackendWrites += ls.BackendWrites
	st.BackendDeletes += ls.BackendDeletes
	if ls != (lb.Stats{}) {
		st.Upserts++
	}
	if err != nil {
		return err
	}
	if k.Proto == lb.UDP && ls.BackendDeletes > 0 && p.cfg.Netns != nil {
		var errs []error
		for _, ns := range p.cfg.Netns() {
			errs = append(errs, dp.TerminateStaleUDP(ns))
		}
		return errors.Join(errs...)
	}
	return nil
}

// add folds st into the totals; p.mu is held.
func (p *Proxy) add(st Stats) {
	p.stats.ServiceWrites += st.ServiceWrites
	p.stats.BackendWrites += st.BackendWrites
	p.stats.BackendDeletes += st.BackendDeletes
	p.stats.Upserts += st.Upserts
	p.stats.Deletes += st.Deletes
}

func compareKeys(a, b lb.ServiceKey) int {
	if c := a.VIP.Compare(b.VIP); c != 0 {
		return c
	}
	if a.Port != b.Port {
		return int(a.Port) - int(b.Port)
	}
	return int(a.Proto) - int(b.Proto)
}

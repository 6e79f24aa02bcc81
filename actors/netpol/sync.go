package netpol

import (
	"errors"
	"maps"
	"net/netip"
	"slices"
	"strings"
	"time"

	"github.com/skiff-sh/skiff/actors/informer"
	"github.com/skiff-sh/skiff/bpf/policy"
)

// syncPod makes one local pod's entries match its policies: new and changed rules first,
// then its isolation, then stale rules, so a pod being isolated never lacks a rule it keeps.
func (e *Enforcer) syncPod(dp *policy.Dataplane, key string) error {
	start := time.Now()
	want, ok, cerr := e.desired(key)
	e.mu.Lock()
	have := e.owned[key]
	if cerr != nil {
		e.lastErr[key] = cerr.Error()
	} else {
		delete(e.lastErr, key)
	}
	e.mu.Unlock()
	if cerr != nil {
		e.cfg.Logger.Warn("netpol: rules refused (fail closed)", "pod", key, "err", cerr)
	}
	var errs []error
	writes, deletes := 0, 0
	for k, ports := range want.rules {
		if old, ok := have.rules[k]; ok && slices.Equal(old, ports) {
			continue
		}
		if err := dp.SetRule(k, ports); err != nil {
			errs = append(errs, err)
		}
		writes++
	}
	if have.ip.IsValid() && have.ip != want.ip {
		errs = append(errs, dp.SetEndpoint(have.ip, policy.Endpoint{}))
	}
	if want.ip.IsValid() && (want.ep != have.ep || want.ip != have.ip) {
		errs = append(errs, dp.SetEndpoint(want.ip, want.ep))
	}
	for k := range have.rules {
		if _, ok := want.rules[k]; !ok {
			errs = append(errs, dp.DeleteRule(k))
			deletes++
		}
	}
	if err := errors.Join(errs...); err != nil {
		return err // owned stays as it was: the retry rewrites what differs
	}
	e.mu.Lock()
	if ok {
		e.owned[key] = want
	} else {
		delete(e.owned, key)
	}
	e.stats.Syncs++
	e.stats.RuleWrites += writes
	e.stats.RuleDeletes += deletes
	e.stats.LastSyncTook = time.Since(start)
	e.mu.Unlock()
	return nil
}

// desired is a local pod's entries; ok is false when it has none (gone, elsewhere, no
// address yet, or selected by no policy).
func (e *Enforcer) desired(key string) (programmed, bool, error) {
	ns, name, _ := cut(key)
	pod, found := e.pods.Get(ns, name)
	if !found || pod.Spec.NodeName != e.cfg.NodeName {
		return programmed{}, false, nil
	}
	ip, ok := podIPv4(pod)
	if !ok {
		return programmed{}, false, nil
	}
	d, err := Compute(pod, ip, peers{e})
	if !d.Endpoint.Ingress && !d.Endpoint.Egress {
		return programmed{}, false, err
	}
	return programmed{ip: ip, ep: d.Endpoint, rules: d.Rules}, true, err
}

func cut(key string) (ns, name string, ok bool) { return strings.Cut(key, "/") }

// resync programs every local pod and removes what the maps hold beyond that (entries of
// pods that went while no enforcer ran).
func (e *Enforcer) resync(dp *policy.Dataplane) error {
	state, err := dp.Dump()
	if err != nil {
		return err
	}
	// What an earlier incarnation wrote is in the maps but not in owned: adopt it as "had",
	// so syncPod rewrites only what differs and the sweep below finds the rest.
	byIP := map[netip.Addr]*programmed{}
	for ip, ep := range state.Endpoints {
		byIP[ip] = &programmed{ip: ip, ep: ep, rules: map[policy.RuleKey][]policy.PortRange{}}
	}
	for k, ports := range state.Rules {
		if p := byIP[k.Pod]; p != nil {
			p.rules[k] = ports
		}
	}
	local := e.pods.ByIndex(informer.IndexNodeName, e.cfg.NodeName)
	e.mu.Lock()
	for _, p := range local {
		if ip, ok := podIPv4(p); ok && byIP[ip] != nil {
			e.owned[keyOf(p.Namespace, p.Name)] = *byIP[ip]
		}
	}
	e.mu.Unlock()
	var errs []error
	for _, p := range local {
		errs = append(errs, e.syncPod(dp, keyOf(p.Namespace, p.Name)))
	}
	if err := errors.Join(errs...); err != nil {
		return err
	}
	kept := map[netip.Addr]bool{}
	e.mu.Lock()
	for _, p := range e.owned {
		kept[p.ip] = true
	}
	e.mu.Unlock()
	for ip := range state.Endpoints {
		if !kept[ip] {
			errs = append(errs, dp.SetEndpoint(ip, policy.Endpoint{}))
		}
	}
	for k := range state.Rules {
		if !kept[k.Pod] {
			errs = append(errs, dp.DeleteRule(k))
		}
	}
	return errors.Join(errs...)
}

// Errors lists the local pods whose rules could not be programmed and why (they fail closed).
func (e *Enforcer) Errors() map[string]string {
	e.mu.Lock()
	defer e.mu.Unlock()
	return maps.Clone(e.lastErr)
}

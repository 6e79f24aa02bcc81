package lbbench

import (
	"errors"
	"net/netip"
	"time"

	"github.com/skiff-sh/skiff/bpf/lb"
	"github.com/skiff-sh/skiff/services/skiff-bench/benchutil"
)

func lbSpec(b int, changed bool) lb.ServiceSpec {
	var s lb.ServiceSpec
	for _, be := range backendsOf(b, changed) {
		s.Backends = append(s.Backends, lb.Backend{Addr: be.Addr(), Port: be.Port()})
	}
	return s
}

func lbKey(i int) lb.ServiceKey {
	return lb.ServiceKey{VIP: vipOf(i), Port: svcPort, Proto: lb.TCP}
}

func runEBPF(ns *benchutil.NSThread, cg *benchCgroup, n int, opts Options) (r result, err error) {
	b := opts.BackendsPerService
	dp, err := lb.Load(lb.Options{
		MaxServices: uint32(n) + 1,
		MaxBackends: uint32(n*b + b + 1),
	})
	if err != nil {
		return r, err
	}
	defer func() { err = errors.Join(err, dp.Close()) }()
	if err := dp.Attach(cg.child); err != nil {
		return r, err
	}
	spec := lbSpec(b, false)
	start := time.Now()
	for i := range n {
		if _, err := dp.Upsert(lbKey(i), spec); err != nil {
			return r, err
		}
	}
	r.program = time.Since(start)
	var changes []time.Duration
	for c := range opts.Changes {
		s := lbSpec(b, c%2 == 0)
		start := time.Now()
		if _, err := dp.Upsert(lbKey(n/2), s); err != nil {
			return r, err
		}
		changes = append(changes, time.Since(start))
	}
	r.change = median(changes)

	if err := cg.enter(); err != nil {
		return r, err
	}
	err = ns.Do(func() error {
		var err error
		r.p50, r.p99, err = benchutil.ConnectLatency(netip.AddrPort(target(n)), opts.Connects)
		return err
	})
	return r, errors.Join(err, cg.leave())
}

package controlplane

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"slices"
	"strings"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/skiff-sh/skiff/actors/actorkit"
)

// DefaultLeaseDuration is how long a dead leader's lease blocks a standby (Kubernetes' 15 s).
const DefaultLeaseDuration = 15 * time.Second

func defaultIdentity() string {
	host, _ := os.Hostname()
	b := make([]byte, 4)
	_, _ = rand.Read(b)
	// A host may be named anything ("(none)" on a bare VM); the identity is part of NATS KV keys.
	host = strings.Map(func(r rune) rune {
		if identityChar(r) && r != '.' {
			return r
		}
		return '-'
	}, host)
	return host + "-" + hex.EncodeToString(b)
}

// identityChar is what a NATS KV key token may hold, so an identity can name its announcement.
func identityChar(r rune) bool {
	return r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || strings.ContainsRune("-_=.", r)
}

func validIdentity(id string) error {
	if id == "" || strings.HasPrefix(id, ".") || strings.HasSuffix(id, ".") || strings.Contains(id, "..") || strings.IndexFunc(id, func(r rune) bool { return !identityChar(r) }) >= 0 {
		return fmt.Errorf("identity (--identity) %q: letters, digits, '-', '_', '=' and inner '.' only", id)
	}
	return nil
}

// elected runs a part of the control plane: at once without leader election, or only while
// this process holds leaseName. spawn starts the part's actors (their PIDs are stopped when
// the part stops); loop, if set, runs beside them until then.
type elected struct {
	leaseName string
	spawn     func() ([]*actorkit.PID, error)
	loop      func(ctx context.Context)
}

// run starts p: at once without leader election (an error is Start's), else in the background
// whenever this process wins p's lease, until Stop.
func (cp *ControlPlane) run(p elected) error {
	if cp.cfg.LeaderElect {
		cp.wg.Add(1)
		go func() {
			defer cp.wg.Done()
			cp.campaign(p)
		}()
		return nil
	}
	if p.spawn != nil {
		pids, err := p.spawn()
		cp.track(pids) // Stop stops them
		if err != nil {
			return err
		}
	}
	cp.setLeading(p.leaseName, true)
	if p.loop != nil {
		cp.wg.Add(1)
		go func() {
			defer cp.wg.Done()
			p.loop(cp.bg)
		}()
	}
	return nil
}

// lead runs p while this process holds its lease (until ctx ends); abdicate gives the lease
// up when the actors cannot start.
func (cp *ControlPlane) lead(ctx context.Context, p elected, abdicate func()) {
	log := cp.cfg.Logger.With("lease", p.leaseName, "identity", cp.identity)
	var pids []*actorkit.PID
	if p.spawn != nil {
		var err error
		pids, err = p.spawn()
		cp.track(pids)
		if err != nil {
			log.Error("cannot start what the lease guards; stepping down", "err", err)
			cp.untrack(pids)
			abdicate()
			return
		}
	}
	cp.setLeading(p.leaseName, true)
	log.Info("leading")
	if p.loop != nil {
		p.loop(ctx)
	}
	<-ctx.Done()
	cp.setLeading(p.leaseName, false)
	cp.untrack(pids)
	log.Info("stopped leading")
}

// campaign contends for p's lease until cp.bg ends. A transient failure (the lease bucket
// unreachable while NATS fails over) restarts the campaign; only a closed connection ends it.
func (cp *ControlPlane) campaign(p elected) {
	ttl := cp.cfg.LeaseDuration
	for cp.bg.Err() == nil {
		ctx, cancel := context.WithCancel(cp.bg)
		err := cp.elector.Run(ctx, p.leaseName, cp.identity, ttl, func(lctx context.Context) {
			cp.lead(lctx, p, cancel)
		}, func() {})
		cancel()
		if cp.bg.Err() != nil || errors.Is(err, nats.ErrConnectionClosed) {
			return
		}
		cp.cfg.Logger.Warn("leader election interrupted; retrying", "lease", p.leaseName, "err", err)
		select {
		case <-cp.bg.Done():
		case <-time.After(ttl / 4):
		}
	}
}

func (cp *ControlPlane) setLeading(leaseName string, on bool) {
	cp.mu.Lock()
	defer cp.mu.Unlock()
	if on {
		cp.leading[leaseName] = true
	} else {
		delete(cp.leading, leaseName)
	}
}

// Leading reports whether this process runs what the lease guards right now (always, once
// started, without leader election).
func (cp *ControlPlane) Leading(leaseName string) bool {
	cp.mu.Lock()
	defer cp.mu.Unlock()
	return cp.leading[leaseName]
}

// Identity is this process's name in lease records.
func (cp *ControlPlane) Identity() string { return cp.identity }

func (cp *ControlPlane) track(pids []*actorkit.PID) {
	cp.mu.Lock()
	defer cp.mu.Unlock()
	cp.pids = append(cp.pids, pids...)
}

// untrack stops pids (in reverse order) and forgets them.
func (cp *ControlPlane) untrack(pids []*actorkit.PID) {
	for i := len(pids) - 1; i >= 0; i-- {
		cp.Actors.Stop(pids[i])
	}
	cp.mu.Lock()
	defer cp.mu.Unlock()
	cp.pids = slices.DeleteFunc(cp.pids, func(p *actorkit.PID) bool { return slices.Contains(pids, p) })
}

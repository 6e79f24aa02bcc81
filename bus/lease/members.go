package lease

import (
	"context"
	"errors"
	"strings"
	"time"

	"github.com/nats-io/nats.go/jetstream"
)

// Member is one live announcement under a prefix: who is there and what it says.
type Member struct {
	Name  string
	Value []byte
}

// Announce records that name is present under prefix (value: what it announces) for ttl; it
// must be renewed within ttl, as kube-apiserver renews its master lease.
func (e *Elector) Announce(ctx context.Context, prefix, name string, value []byte) error {
	_, err := e.kv.Put(ctx, prefix+"."+name, value)
	return err
}

// Withdraw removes name's announcement at once (a replica shutting down).
func (e *Elector) Withdraw(ctx context.Context, prefix, name string) error {
	return e.kv.Delete(ctx, prefix+"."+name)
}

// Members lists the announcements under prefix renewed within ttl, judged by the time the
// NATS server stored them, so no member's clock decides.
func (e *Elector) Members(ctx context.Context, prefix string, ttl time.Duration, now time.Time) ([]Member, error) {
	lister, err := e.kv.ListKeysFiltered(ctx, prefix+".>")
	if errors.Is(err, jetstream.ErrNoKeysFound) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	defer func() { _ = lister.Stop() }()
	var out []Member
	for key := range lister.Keys() {
		ent, err := e.kv.Get(ctx, key)
		if errors.Is(err, jetstream.ErrKeyNotFound) || errors.Is(err, jetstream.ErrKeyDeleted) {
			continue
		}
		if err != nil {
			return nil, err
		}
		if ent.Created().Add(ttl).Before(now) {
			continue
		}
		out = append(out, Member{Name: strings.TrimPrefix(key, prefix+"."), Value: ent.Value()})
	}
	return out, nil
}

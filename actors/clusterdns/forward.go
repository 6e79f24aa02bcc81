package clusterdns

import (
	"context"
	"errors"
	"net"
	"strings"
	"sync"
	"time"

	"github.com/miekg/dns"
)

// Cache bounds: answers from upstream are kept for their TTL up to MaxCacheTTL, so a changed
// record outside the cluster is seen within that; at most cacheEntries are kept.
const (
	MaxCacheTTL  = 30 * time.Second
	cacheEntries = 10000
	upstreamWait = 2 * time.Second
)

// forwarder answers names outside the cluster zone from the node's upstream resolvers.
type forwarder struct {
	upstreams []string // ip:port
	mu        sync.Mutex
	cache     map[cacheKey]cached
	now       func() time.Time
}

type cacheKey struct {
	name         string
	qtype, class uint16
	do           bool // DNSSEC records asked for
}

type cached struct {
	msg     *dns.Msg
	stored  time.Time
	expires time.Time
}

func newForwarder(servers []string) *forwarder {
	f := &forwarder{cache: map[cacheKey]cached{}, now: time.Now}
	for _, s := range servers {
		if _, _, err := net.SplitHostPort(s); err != nil {
			s = net.JoinHostPort(s, "53")
		}
		f.upstreams = append(f.upstreams, s)
	}
	return f
}

var errNoUpstream = errors.New("no upstream resolver (the node's resolv.conf names none that is not loopback)")

// forward answers q from the cache or the first upstream that answers; the reply's ID and
// question are the caller's to set.
func (f *forwarder) forward(ctx context.Context, q dns.Question, do bool) (*dns.Msg, error) {
	key := cacheKey{strings.ToLower(q.Name), q.Qtype, q.Qclass, do}
	if m := f.cached(key); m != nil {
		return m, nil
	}
	if len(f.upstreams) == 0 {
		return nil, errNoUpstream
	}
	req := new(dns.Msg)
	req.Question = []dns.Question{q}
	req.RecursionDesired = true
	req.SetEdns0(dns.DefaultMsgSize, do)
	var errs []error
	for _, up := range f.upstreams {
		m, err := exchange(ctx, req, up)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		f.store(key, m)
		return m.Copy(), nil
	}
	return nil, errors.Join(errs...)
}

// exchange asks one upstream over UDP, and again over TCP when the answer was truncated.
func exchange(ctx context.Context, req *dns.Msg, server string) (*dns.Msg, error) {
	ctx, cancel := context.WithTimeout(ctx, upstreamWait)
	defer cancel()
	m, _, err := (&dns.Client{Net: "udp", UDPSize: dns.DefaultMsgSize}).ExchangeContext(ctx, req, server)
	if err == nil && m.Truncated {
		m, _, err = (&dns.Client{Net: "tcp"}).ExchangeContext(ctx, req, server)
	}
	return m, err
}

// cached returns a copy of a live entry with its TTLs aged.
func (f *forwarder) cached(key cacheKey) *dns.Msg {
	now := f.now()
	f.mu.Lock()
	c, ok := f.cache[key]
	f.mu.Unlock()
	if !ok || !now.Before(c.expires) {
		return nil
	}
	m := c.msg.Copy()
	age := uint32(now.Sub(c.stored) / time.Second)
	for _, sec := range [][]dns.RR{m.Answer, m.Ns, m.Extra} {
		for _, rr := range sec {
			if h := rr.Header(); h.Rrtype != dns.TypeOPT {
				h.Ttl -= min(age, h.Ttl)
			}
		}
	}
	return m
}

// store keeps answers and negative answers for their TTL (a negative one for its SOA's
// minimum), at most MaxCacheTTL; failures are not kept.
func (f *forwarder) store(key cacheKey, m *dns.Msg) {
	if m.Rcode != dns.RcodeSuccess && m.Rcode != dns.RcodeNameError || m.Truncated {
		return
	}
	ttl := MaxCacheTTL
	for _, sec := range [][]dns.RR{m.Answer, m.Ns} {
		for _, rr := range sec {
			t := time.Duration(rr.Header().Ttl) * time.Second
			if soa, ok := rr.(*dns.SOA); ok {
				t = min(t, time.Duration(soa.Minttl)*time.Second)
			}
			ttl = min(ttl, t)
		}
	}
	if ttl <= 0 {
		return
	}
	now := f.now()
	f.mu.Lock()
	defer f.mu.Unlock()
	if len(f.cache) >= cacheEntries {
		f.evict(now)
	}
	f.cache[key] = cached{msg: m.Copy(), stored: now, expires: now.Add(ttl)}
}

// evict drops expired entries, or, when none is, an arbitrary tenth of the cache.
func (f *forwarder) evict(now time.Time) {
	n := 0
	for k, c := range f.cache {
		if !now.Before(c.expires) {
			delete(f.cache, k)
			n++
		}
	}
	for k := range f.cache {
		if n >= cacheEntries/10 {
			return
		}
		delete(f.cache, k)
		n++
	}
}

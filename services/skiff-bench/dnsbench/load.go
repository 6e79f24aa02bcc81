package dnsbench

import (
	"context"
	"encoding/binary"
	"fmt"
	"math/rand/v2"
	"net"
	"sync"
	"time"

	"github.com/miekg/dns"

	"github.com/skiff-sh/skiff/services/skiff-bench/benchutil"
)

// loadResult is one load run against one server.
type loadResult struct {
	qps      float64
	p50, p99 time.Duration
	failed   int // replies that were not NOERROR with an answer, and timeouts
}

// load sends A queries for names, picked at random, to server over UDP from workers
// goroutines, each waiting for its reply before the next (closed loop), for d. The queries are
// packed once; a reply is checked by its header (ID, rcode, answer count) so the generator
// spends little of the CPU it shares with the server.
func load(ctx context.Context, server string, names []string, workers int, d time.Duration) (loadResult, error) {
	packed := make([][]byte, len(names))
	for i, n := range names {
		m := new(dns.Msg).SetQuestion(n, dns.TypeA)
		b, err := m.Pack()
		if err != nil {
			return loadResult{}, fmt.Errorf("pack %s: %w", n, err)
		}
		packed[i] = b
	}
	var mu sync.Mutex
	var lat []time.Duration
	failed := 0
	deadline := time.Now().Add(d)
	start := time.Now()
	err := benchutil.Parallel(workers, workers, func(int) error {
		conn, err := net.Dial("udp", server)
		if err != nil {
			return err
		}
		defer conn.Close()
		mine := make([]time.Duration, 0, 1<<16)
		bad := 0
		buf := make([]byte, dns.DefaultMsgSize)
		q := make([]byte, 0, 512)
		for id := uint16(rand.Uint32()); time.Now().Before(deadline) && ctx.Err() == nil; id++ {
			q = append(q[:0], packed[rand.IntN(len(packed))]...)
			binary.BigEndian.PutUint16(q, id)
			sent := time.Now()
			if _, err := conn.Write(q); err != nil {
				return err
			}
			_ = conn.SetReadDeadline(sent.Add(time.Second))
			if !awaitReply(conn, buf, id) {
				bad++
				continue
			}
			mine = append(mine, time.Since(sent))
		}
		mu.Lock()
		lat, failed = append(lat, mine...), failed+bad
		mu.Unlock()
		return nil
	})
	elapsed := time.Since(start)
	if err != nil {
		return loadResult{}, err
	}
	if len(lat) == 0 {
		return loadResult{}, fmt.Errorf("%s answered no query (%d failed)", server, failed)
	}
	r := loadResult{qps: benchutil.Rate(len(lat), elapsed), failed: failed}
	r.p50, r.p99 = benchutil.Percentiles(lat)
	return r, nil
}

// awaitReply reads until the reply to id arrives (a late reply to an earlier query is
// skipped) and reports whether it is NOERROR with at least one answer.
func awaitReply(conn net.Conn, buf []byte, id uint16) bool {
	for {
		n, err := conn.Read(buf)
		if err != nil {
			return false
		}
		if n < 12 || binary.BigEndian.Uint16(buf) != id {
			continue
		}
		rcode := buf[3] & 0x0f
		return rcode == dns.RcodeSuccess && binary.BigEndian.Uint16(buf[6:]) > 0
	}
}

// addrs asks server for name's A records once: the addresses, or none on any failure.
func addrs(server, name string) []string {
	c := &dns.Client{Net: "udp", Timeout: 200 * time.Millisecond}
	m, _, err := c.Exchange(new(dns.Msg).SetQuestion(name, dns.TypeA), server)
	if err != nil || m.Rcode != dns.RcodeSuccess {
		return nil
	}
	var out []string
	for _, rr := range m.Answer {
		if a, ok := rr.(*dns.A); ok {
			out = append(out, a.A.String())
		}
	}
	return out
}

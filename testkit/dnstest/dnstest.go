// Package dnstest runs a DNS server for tests: an upstream resolver the test controls, on
// loopback, so nothing leaves the host.
package dnstest

import (
	"net"
	"testing"

	"github.com/miekg/dns"
)

// Serve answers UDP queries on a loopback port until the test ends: answer fills in the reply
// (already SetReply'd) to each query's question. It returns the server's ip:port.
func Serve(t testing.TB, answer func(dns.Question, *dns.Msg)) string {
	t.Helper()
	pc, err := net.ListenPacket("udp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := &dns.Server{PacketConn: pc, Handler: dns.HandlerFunc(func(w dns.ResponseWriter, r *dns.Msg) {
		m := new(dns.Msg)
		m.SetReply(r)
		answer(r.Question[0], m)
		_ = w.WriteMsg(m)
	})}
	go func() { _ = srv.ActivateAndServe() }()
	t.Cleanup(func() { _ = srv.Shutdown() })
	return pc.LocalAddr().String()
}

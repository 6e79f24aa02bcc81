// Package resolvconf reads and writes resolv.conf(5) files: the node's upstream resolvers for the
// cluster DNS server, and the file the kubelet gives each pod per its dnsPolicy.
package resolvconf

import (
	"errors"
	"net/netip"
	"os"
	"strings"
)

// Config is the part of a resolv.conf that Skiff reads and writes.
type Config struct {
	Nameservers []string
	Searches    []string
	Options     []string // "ndots:5", "edns0", ...
}

// Parse reads the nameserver, search/domain and options lines, as glibc does: the last search
// or domain line wins, options accumulate, comments start with '#' or ';'.
func Parse(data []byte) Config {
	var c Config
	for _, line := range strings.Split(string(data), "\n") {
		if i := strings.IndexAny(line, "#;"); i >= 0 {
			line = line[:i]
		}
		f := strings.Fields(line)
		if len(f) == 0 {
			continue
		}
		switch f[0] {
		case "nameserver":
			if len(f) > 1 {
				c.Nameservers = append(c.Nameservers, f[1])
			}
		case "search", "domain":
			c.Searches = append([]string(nil), f[1:]...)
		case "options":
			c.Options = append(c.Options, f[1:]...)
		}
	}
	return c
}

// Read parses the file at path; a missing file is an empty Config, as for a resolver.
func Read(path string) (Config, error) {
	b, err := os.ReadFile(path)
	if errors.Is(err, os.ErrNotExist) {
		return Config{}, nil
	}
	return Parse(b), err
}

// String renders c as a resolv.conf.
func (c Config) String() string {
	var b strings.Builder
	for _, ns := range c.Nameservers {
		b.WriteString("nameserver " + ns + "\n")
	}
	if len(c.Searches) > 0 {
		b.WriteString("search " + strings.Join(c.Searches, " ") + "\n")
	}
	if len(c.Options) > 0 {
		b.WriteString("options " + strings.Join(c.Options, " ") + "\n")
	}
	return b.String()
}

// NonLoopback keeps the nameservers that are IP addresses other than loopback ones: a loopback
// resolver on the host (systemd-resolved's 127.0.0.53, a local dnsmasq) is unreachable from a
// pod's network namespace, and one that forwards to the cluster DNS would loop.
func NonLoopback(servers []string) []string {
	var out []string
	for _, s := range servers {
		if a, err := netip.ParseAddr(s); err == nil && !a.IsLoopback() && !a.IsUnspecified() {
			out = append(out, s)
		}
	}
	return out
}

// SystemdResolved is where systemd-resolved lists the real upstreams when /etc/resolv.conf
// names only its stub.
const SystemdResolved = "/run/systemd/resolve/resolv.conf"

// Host reads the node's resolver configuration from path (usually /etc/resolv.conf). When it
// names only loopback resolvers and systemd-resolved's own file exists, that file's
// upstreams are used instead, as kubelet advises; the search path stays the host's.
func Host(path string) (Config, error) {
	c, err := Read(path)
	if err != nil || len(c.Nameservers) == 0 || len(NonLoopback(c.Nameservers)) > 0 {
		return c, err
	}
	if r, err := Read(SystemdResolved); err == nil && len(NonLoopback(r.Nameservers)) > 0 {
		c.Nameservers = r.Nameservers
	}
	return c, nil
}

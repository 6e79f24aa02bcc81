package lbbench

import (
	"bytes"
	"crypto/sha256"
	"encoding/base32"
	"fmt"
	"os/exec"
	"strings"
	"time"
)

// chainName builds a kube-proxy-style chain name: prefix + 16 characters
// of a hash, so names stay within the iptables length limit.
func chainName(prefix, id string) string {
	h := sha256.Sum256([]byte(id))
	return prefix + base32.StdEncoding.EncodeToString(h[:])[:16]
}

// ruleset renders the nat table kube-proxy's iptables mode would write for
// n Services: OUTPUT -> KUBE-SERVICES (one match per Service, scanned
// linearly) -> KUBE-SVC-* (random choice via -m statistic) -> KUBE-SEP-*
// (DNAT). changed applies the endpoint change to service `change`.
func ruleset(n, b, change int, changed bool) []byte {
	var chains, rules strings.Builder
	chains.WriteString("*nat\n:PREROUTING ACCEPT [0:0]\n:INPUT ACCEPT [0:0]\n:OUTPUT ACCEPT [0:0]\n:POSTROUTING ACCEPT [0:0]\n")
	chains.WriteString(":KUBE-SERVICES - [0:0]\n:KUBE-MARK-MASQ - [0:0]\n")
	rules.WriteString("-A OUTPUT -j KUBE-SERVICES\n")
	rules.WriteString("-A KUBE-MARK-MASQ -j MARK --or-mark 0x4000\n")
	for i := range n {
		name := fmt.Sprintf("default/svc-%d:http", i)
		svc := chainName("KUBE-SVC-", name)
		fmt.Fprintf(&chains, ":%s - [0:0]\n", svc)
		fmt.Fprintf(&rules, "-A KUBE-SERVICES -d %s/32 -p tcp -m tcp --dport %d -j %s\n", vipOf(i), svcPort, svc)
		bes := backendsOf(b, changed && i == change)
		for j, be := range bes {
			sep := chainName("KUBE-SEP-", name+be.String())
			fmt.Fprintf(&chains, ":%s - [0:0]\n", sep)
			if left := len(bes) - j; left > 1 {
				fmt.Fprintf(&rules, "-A %s -m statistic --mode random --probability %.11f -j %s\n", svc, 1/float64(left), sep)
			} else {
				fmt.Fprintf(&rules, "-A %s -j %s\n", svc, sep)
			}
			fmt.Fprintf(&rules, "-A %s -s %s/32 -j KUBE-MARK-MASQ\n", sep, be.Addr())
			fmt.Fprintf(&rules, "-A %s -p tcp -m tcp -j DNAT --to-destination %s\n", sep, be)
		}
	}
	return []byte(chains.String() + rules.String() + "COMMIT\n")
}

// restore loads a full nat table, as kube-proxy's full sync does; it must
// run on the namespace thread so the child inherits the namespace.
func restore(rules []byte) (time.Duration, error) {
	cmd := exec.Command("iptables-restore")
	cmd.Stdin = bytes.NewReader(rules)
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	start := time.Now()
	err := cmd.Run()
	d := time.Since(start)
	if err != nil {
		return 0, fmt.Errorf("iptables-restore: %w: %s", err, out.String())
	}
	return d, nil
}

func iptablesVersion() string {
	out, err := exec.Command("iptables-restore", "--version").CombinedOutput()
	if err != nil {
		return "iptables-restore (version unknown)"
	}
	return strings.TrimSpace(string(out))
}

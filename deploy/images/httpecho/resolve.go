package main

import (
	"context"
	"fmt"
	"net"
	"os"
	"strings"
	"time"
)

// runResolve looks a name up as a program in the pod would, through Go's own resolver (it
// reads the pod's resolv.conf, search path and ndots included, as the image has no libc).
func runResolve(name, rtype string) int {
	r := &net.Resolver{PreferGo: true}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	var out []string
	var err error
	switch strings.ToUpper(rtype) {
	case "A":
		out, err = r.LookupHost(ctx, name)
	case "CNAME":
		var c string
		c, err = r.LookupCNAME(ctx, name)
		out = []string{c}
	case "SRV":
		var srvs []*net.SRV
		// An empty service and proto look NAME up as given (_port._proto.service...).
		_, srvs, err = r.LookupSRV(ctx, "", "", name)
		for _, s := range srvs {
			out = append(out, fmt.Sprintf("%s %d", s.Target, s.Port))
		}
	default:
		fmt.Fprintf(os.Stderr, "-resolve-type %q: want A, CNAME or SRV\n", rtype)
		return 2
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	for _, s := range out {
		fmt.Println(s)
	}
	return 0
}

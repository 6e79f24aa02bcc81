//go:build tools

// The CoreDNS the DNS benchmark compares against is built from this module's requirements,
// kept out of Skiff's go.mod.
package main

import _ "github.com/coredns/coredns"

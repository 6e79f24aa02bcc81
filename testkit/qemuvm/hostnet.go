package qemuvm

import (
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"math/big"
	"os/exec"
	"strings"

	"github.com/skiff-sh/skiff/testkit/hostbridge"
)

// busybox is where Debian's busybox-static puts its static binary.
const busybox = "/bin/busybox"

// HostNet is a host bridge with the host's address on it and one tap per VM: the VMs' eth0s
// and the host share one L2 segment, so VMs reach each other and the host directly.
type HostNet struct {
	Bridge string
	Prefix string // first three octets of the /24, e.g. "10.213.7"
	HostIP string // Prefix + ".1"
	taps   []string
	remove func()
}

// NewHostNet creates a bridge with a random name and a random 10.x.y.0/24 not routed on the
// host yet, so concurrent suites do not collide.
func NewHostNet() (*HostNet, error) {
	suffix := make([]byte, 3)
	if _, err := rand.Read(suffix); err != nil {
		return nil, err
	}
	h := &HostNet{Bridge: "skvm" + hex.EncodeToString(suffix)}
	routes, _ := exec.Command("ip", "-4", "route", "show").Output()
	for range 20 {
		a, _ := rand.Int(rand.Reader, big.NewInt(40))
		b, _ := rand.Int(rand.Reader, big.NewInt(256))
		p := fmt.Sprintf("10.%d.%d", 200+a.Int64(), b.Int64())
		if !strings.Contains(string(routes), p+".") {
			h.Prefix = p
			break
		}
	}
	if h.Prefix == "" {
		return nil, fmt.Errorf("no free 10.x.y.0/24 found")
	}
	h.HostIP = h.Prefix + ".1"
	remove, err := hostbridge.Create(h.Bridge, h.HostIP+"/24")
	if err != nil {
		return nil, err
	}
	h.remove = remove
	return h, nil
}

// Tap adds a tap device on the bridge for VM number i and returns its name and a MAC for the
// VM's NIC (locally administered, unique per bridge and VM).
func (h *HostNet) Tap(i int) (tap, mac string, err error) {
	tap = fmt.Sprintf("%st%d", h.Bridge, i)
	if err := run("ip", "tuntap", "add", "dev", tap, "mode", "tap"); err != nil {
		return "", "", err
	}
	h.taps = append(h.taps, tap)
	if err := run("ip", "link", "set", tap, "master", h.Bridge); err != nil {
		return "", "", err
	}
	if err := run("ip", "link", "set", tap, "up"); err != nil {
		return "", "", err
	}
	id := h.Bridge[len("skvm"):]
	mac = fmt.Sprintf("52:54:%s:%s:%s:%02x", id[0:2], id[2:4], id[4:6], i)
	return tap, mac, nil
}

// IP is VM number i's address on the bridge.
func (h *HostNet) IP(i int) string { return fmt.Sprintf("%s.%d", h.Prefix, 10+i) }

// Close removes the taps and the bridge.
func (h *HostNet) Close() {
	for _, t := range h.taps {
		_ = run("ip", "link", "delete", t)
	}
	h.remove()
}

func run(name string, args ...string) error {
	if out, err := exec.Command(name, args...).CombinedOutput(); err != nil {
		return fmt.Errorf("%s %s: %v: %s", name, strings.Join(args, " "), err, strings.TrimSpace(string(out)))
	}
	return nil
}

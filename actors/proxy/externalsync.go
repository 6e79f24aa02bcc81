package proxy

import (
	"errors"
	"fmt"
	"maps"
	"net"
	"net/netip"
	"path/filepath"
	"slices"

	"github.com/skiff-sh/skiff/bpf/lb"
	"github.com/skiff-sh/skiff/bpf/nodeport"
)

// syncExternal makes one Service's tc entries want (np nil: outside traffic is not served).
func (p *Proxy) syncExternal(np *nodeport.Dataplane, key string, want map[nodeport.Key][]nodeport.Backend) error {
	if np == nil {
		return nil
	}
	p.mu.Lock()
	old := p.extOwned[key]
	p.mu.Unlock()
	var errs []error
	for _, k := range old {
		if _, keep := want[k]; !keep {
			errs = append(errs, np.Delete(k))
		}
	}
	keys := slices.SortedFunc(maps.Keys(want), compareExtKeys)
	for _, k := range keys {
		errs = append(errs, np.Set(k, want[k]))
	}
	p.mu.Lock()
	if len(keys) == 0 {
		delete(p.extOwned, key)
	} else {
		p.extOwned[key] = keys
	}
	p.mu.Unlock()
	return errors.Join(errs...)
}

// resyncExternal makes the tc map hold exactly want (owner: the Service of each key),
// writing only the entries that differ from what the kernel holds.
func (p *Proxy) resyncExternal(np *nodeport.Dataplane, want map[nodeport.Key][]nodeport.Backend, owner map[nodeport.Key]string) error {
	if np == nil {
		return nil
	}
	have, err := np.Dump()
	if err != nil {
		return err
	}
	var errs []error
	seen := map[nodeport.Key]bool{}
	for _, h := range have {
		seen[h.Key] = true
		w, ok := want[h.Key]
		switch {
		case !ok:
			errs = append(errs, np.Delete(h.Key))
		case !slices.Equal(sortedBackends(w), h.Backends):
			errs = append(errs, np.Set(h.Key, w))
		}
	}
	owned := map[string][]nodeport.Key{}
	for k, w := range want {
		if !seen[k] {
			errs = append(errs, np.Set(k, w))
		}
		owned[owner[k]] = append(owned[owner[k]], k)
	}
	p.mu.Lock()
	p.extOwned = owned
	p.mu.Unlock()
	return errors.Join(errs...)
}

func sortedBackends(bs []nodeport.Backend) []nodeport.Backend {
	return slices.SortedFunc(slices.Values(bs), func(a, b nodeport.Backend) int {
		if c := a.Addr.Compare(b.Addr); c != 0 {
			return c
		}
		return int(a.Port) - int(b.Port)
	})
}

func compareExtKeys(a, b nodeport.Key) int {
	return compareKeys(lb.ServiceKey{VIP: a.Addr, Port: a.Port, Proto: a.Proto}, lb.ServiceKey{VIP: b.Addr, Port: b.Port, Proto: b.Proto})
}

// openExternal loads the tc programs and attaches them to the node's external interfaces;
// nil when the node has no addresses to serve node ports on.
func (p *Proxy) openExternal() (*nodeport.Dataplane, error) {
	if len(p.cfg.NodeIPs) == 0 {
		return nil, nil
	}
	ifaces := p.cfg.Interfaces
	if len(ifaces) == 0 {
		var err error
		if ifaces, err = interfacesOf(p.cfg.NodeIPs); err != nil {
			return nil, err
		}
	}
	np, err := nodeport.Load(nodeport.Options{PinPath: filepath.Join(p.cfg.PinDir, "nodeport")})
	if err != nil {
		return nil, err
	}
	for _, name := range ifaces {
		if err := np.Attach(name); err != nil {
			np.Close()
			return nil, err
		}
	}
	return np, nil
}

// interfacesOf names the interfaces holding addrs.
func interfacesOf(addrs []netip.Addr) ([]string, error) {
	ifs, err := net.Interfaces()
	if err != nil {
		return nil, err
	}
	var out []string
	for _, ifc := range ifs {
		as, err := ifc.Addrs()
		if err != nil {
			continue
		}
		for _, a := range as {
			if n, ok := a.(*net.IPNet); ok {
				if ip, ok := netip.AddrFromSlice(n.IP); ok && slices.Contains(addrs, ip.Unmap()) && !slices.Contains(out, ifc.Name) {
					out = append(out, ifc.Name)
				}
			}
		}
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("no interface holds the node addresses %v", addrs)
	}
	return out, nil
}

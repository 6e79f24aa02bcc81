package tcattach

import (
	"errors"
	"fmt"
	"strings"

	"github.com/cilium/ebpf"
	"github.com/vishvananda/netlink"
	"golang.org/x/sys/unix"
)

// filterHandle is the handle of every filter here: with the priority it names the filter.
const filterHandle = 1

func parent(egress bool) uint32 {
	if egress {
		return netlink.HANDLE_MIN_EGRESS
	}
	return netlink.HANDLE_MIN_INGRESS
}

func device(ifindex int) netlink.Link {
	return &netlink.Device{LinkAttrs: netlink.LinkAttrs{Index: ifindex}}
}

func clsact(ifindex int) *netlink.GenericQdisc {
	return &netlink.GenericQdisc{
		QdiscAttrs: netlink.QdiscAttrs{LinkIndex: ifindex, Handle: netlink.MakeHandle(0xffff, 0), Parent: netlink.HANDLE_CLSACT},
		QdiscType:  "clsact",
	}
}

func (h Hook) filter(fd int) *netlink.BpfFilter {
	return &netlink.BpfFilter{
		FilterAttrs: netlink.FilterAttrs{LinkIndex: h.Ifindex, Parent: parent(h.Egress), Handle: filterHandle,
			Protocol: unix.ETH_P_ALL, Priority: h.Priority},
		Fd: fd, Name: h.Name, DirectAction: true,
	}
}

// replaceFilter makes prog the filter at h's priority, creating the clsact qdisc if needed.
// The kernel swaps the program of an existing filter in one step: no packet goes unchecked.
func replaceFilter(h Hook, prog *ebpf.Program) error {
	if h.Name == "" || h.Priority == 0 {
		return errors.New("a legacy tc hook needs a name and a priority")
	}
	// Replacing an existing clsact keeps it and its filters.
	if err := netlink.QdiscReplace(clsact(h.Ifindex)); err != nil {
		return fmt.Errorf("clsact qdisc: %w", err)
	}
	fs, err := Filters(h.Ifindex, h.Egress)
	if err != nil {
		return err
	}
	for _, f := range fs {
		if f.Priority == h.Priority && f.Name != h.Name {
			return fmt.Errorf("tc priority %d is taken by filter %q", h.Priority, f.Name)
		}
	}
	if err := netlink.FilterReplace(h.filter(prog.FD())); err != nil {
		return fmt.Errorf("tc filter: %w", err)
	}
	return nil
}

// deleteFilter removes h's filter if it is there, then the clsact qdisc if that left it with
// no filter on either side. An interface that is gone, or has no clsact, has nothing to remove.
func deleteFilter(h Hook) error {
	if id, err := filterProgram(h); err != nil || id == 0 {
		return err
	}
	if err := netlink.FilterDel(h.filter(0)); err != nil && !gone(err) {
		return fmt.Errorf("delete tc filter %s: %w", h.Name, err)
	}
	return dropEmptyClsact(h.Ifindex)
}

func dropEmptyClsact(ifindex int) error {
	for _, egress := range []bool{false, true} {
		fs, err := netlink.FilterList(device(ifindex), parent(egress))
		if err != nil || len(fs) > 0 {
			return nil // no clsact, or someone's filters still there
		}
	}
	if err := netlink.QdiscDel(clsact(ifindex)); err != nil && !gone(err) {
		return fmt.Errorf("delete clsact qdisc: %w", err)
	}
	return nil
}

// gone is the kernel saying there is nothing to act on: no interface, no qdisc, no filter.
func gone(err error) bool {
	return errors.Is(err, unix.ENODEV) || errors.Is(err, unix.ENOENT) || errors.Is(err, unix.EINVAL)
}

// Filter is a cls_bpf filter as the kernel lists it.
type Filter struct {
	Name     string
	Priority uint16
	ProgID   int
}

// Filters lists the bpf filters on one side of an interface (none without a clsact qdisc).
func Filters(ifindex int, egress bool) ([]Filter, error) {
	fs, err := netlink.FilterList(device(ifindex), parent(egress))
	if err != nil {
		if errors.Is(err, unix.EINVAL) {
			return nil, nil // no clsact qdisc
		}
		return nil, fmt.Errorf("list tc filters of interface %d: %w", ifindex, err)
	}
	var out []Filter
	for _, f := range fs {
		if b, ok := f.(*netlink.BpfFilter); ok {
			out = append(out, Filter{Name: b.Name, Priority: b.Priority, ProgID: b.Id})
		}
	}
	return out, nil
}

// Found is where filters named with a prefix are attached.
type Found struct {
	Ifindex int
	Egress  bool
	Filter
}

// FindFilters lists the filters named with prefix on every interface of this network
// namespace: what legacy attaches left, which no pin records.
func FindFilters(prefix string) ([]Found, error) {
	links, err := netlink.LinkList()
	if err != nil {
		return nil, fmt.Errorf("list interfaces: %w", err)
	}
	var out []Found
	for _, l := range links {
		for _, egress := range []bool{false, true} {
			fs, err := Filters(l.Attrs().Index, egress)
			if err != nil && !gone(err) {
				return nil, err
			}
			for _, f := range fs {
				if strings.HasPrefix(f.Name, prefix) {
					out = append(out, Found{Ifindex: l.Attrs().Index, Egress: egress, Filter: f})
				}
			}
		}
	}
	return out, nil
}

// RemoveFilters deletes every filter named with prefix (FindFilters), for a teardown.
func RemoveFilters(prefix string) error {
	found, err := FindFilters(prefix)
	if err != nil {
		return err
	}
	var errs []error
	for _, f := range found {
		errs = append(errs, deleteFilter(Hook{Ifindex: f.Ifindex, Egress: f.Egress, Name: f.Name, Priority: f.Priority}))
	}
	return errors.Join(errs...)
}

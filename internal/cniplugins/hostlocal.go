package cniplugins

import (
	"fmt"
	"net"

	"github.com/containernetworking/cni/pkg/skel"
	"github.com/containernetworking/cni/pkg/types"
	current "github.com/containernetworking/cni/pkg/types/100"
	"github.com/containernetworking/plugins/plugins/ipam/host-local/backend/allocator"
	"github.com/containernetworking/plugins/plugins/ipam/host-local/backend/disk"
)

// host-local: one address per range set from files under dataDir, kept per container and
// interface, with the configured routes.
var hostLocalFuncs = skel.CNIFuncs{Add: hostLocalAdd, Del: hostLocalDel, Check: hostLocalCheck}

func hostLocalConf(args *skel.CmdArgs) (*allocator.IPAMConfig, string, *disk.Store, error) {
	conf, confVersion, err := allocator.LoadIPAMConfig(args.StdinData, args.Args)
	if err != nil {
		return nil, "", nil, err
	}
	if conf.ResolvConf != "" {
		return nil, "", nil, fmt.Errorf("ipam.resolvConf is not supported by skiff's host-local")
	}
	store, err := disk.New(conf.Name, conf.DataDir)
	if err != nil {
		return nil, "", nil, err
	}
	return conf, confVersion, store, nil
}

func hostLocalAdd(args *skel.CmdArgs) error {
	conf, confVersion, store, err := hostLocalConf(args)
	if err != nil {
		return err
	}
	defer store.Close()
	if len(conf.IPArgs) > 0 {
		return fmt.Errorf("requested IPs (args, CNI_ARGS IP) are not supported by skiff's host-local")
	}
	res := &current.Result{CNIVersion: current.ImplementedSpecVersion, Routes: conf.Routes}
	for idx := range conf.Ranges {
		ipc, err := allocator.NewIPAllocator(&conf.Ranges[idx], store, idx).Get(args.ContainerID, args.IfName, net.IP(nil))
		if err != nil {
			// Give back what this call took before failing.
			_ = store.ReleaseByID(args.ContainerID, args.IfName)
			return fmt.Errorf("ipam.ranges[%d]: %w", idx, err)
		}
		res.IPs = append(res.IPs, ipc)
	}
	return types.PrintResult(res, confVersion)
}

func hostLocalDel(args *skel.CmdArgs) error {
	_, _, store, err := hostLocalConf(args)
	if err != nil {
		return err
	}
	defer store.Close()
	return store.ReleaseByID(args.ContainerID, args.IfName)
}

func hostLocalCheck(args *skel.CmdArgs) error {
	_, _, store, err := hostLocalConf(args)
	if err != nil {
		return err
	}
	defer store.Close()
	if !store.FindByID(args.ContainerID, args.IfName) {
		return fmt.Errorf("host-local: no address held for %s/%s", args.ContainerID, args.IfName)
	}
	return nil
}

# A node: skiff agent plus the runtime it drives (containerd, the runc shim, runc, the CNI
# plugins, iptables for the bridge's masquerade) with their shared libraries, staged by build.sh.
FROM scratch
LABEL sh.skiff.compose=1
COPY rootfs/ /
ENV PATH=/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin
ENTRYPOINT ["/usr/local/bin/skiff"]

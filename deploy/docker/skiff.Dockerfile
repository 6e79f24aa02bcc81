# The control plane and the NATS servers: one static skiff binary, nothing else.
FROM scratch
LABEL sh.skiff.compose=1
COPY rootfs/ /
ENV PATH=/usr/local/bin
ENTRYPOINT ["/usr/local/bin/skiff"]

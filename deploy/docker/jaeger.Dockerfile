# Jaeger v2 all-in-one (OTLP 4317/4318, query UI/API 16686), built from its Go module.
FROM scratch
LABEL sh.skiff.compose=1
COPY rootfs/ /
ENTRYPOINT ["/jaeger"]

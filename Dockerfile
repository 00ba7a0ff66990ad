# syntax=docker/dockerfile:1
# rlxd container image, multi-stage: a build stage with the -dev packages and the toolchain,
# a runtime stage with only the shared libraries the binaries link against.
#
#   docker build -t rlxd:cpu .
#   docker build --build-arg BACKEND=cuda --build-arg RLX_COMMIT=$(git rev-parse --short=12 HEAD) -t rlxd:cuda .
#   docker run -p 8080:8080 -v $PWD/models:/models:ro rlxd:cpu       # every GGUF model in ./models
#   docker run -p 8080:8080 -v $PWD/models:/models:ro rlxd:cpu -m /models/qwen.gguf:qwen
#   docker run -p 8080:8080 -v rlxd-data:/var/lib/rlxd -e RLXD_MODEL=hf:Qwen/Qwen3-0.6B-GGUF:Q8_0 rlxd:cpu
#
# Settings are `rlxd serve` flags or RLXD_* variables (see config/rlxd.ini); the image sets
# RLXD_HOST=0.0.0.0 (reachable from outside the container), RLXD_DB (sessions survive a
# restart when /var/lib/rlxd is a volume) and XDG_CACHE_HOME (models fetched with hf:... are
# kept in that volume too). The HEALTHCHECK assumes the default port 8080.
#
# By default every GGUF model in /models (mounted read-only) is served, loaded on demand; an
# empty /models starts healthy with no model and logs how to add one. /var/lib/rlxd (the
# sessions database, KV snapshots, downloaded models) is the only writable path the server
# needs. Runs as the unprivileged user rlxd. The build context is filtered by .dockerignore.
ARG BACKEND=cpu
# the commit for rlxd_build_info and --version (the context has no .git)
ARG RLX_COMMIT=unknown
ARG CUDA_VERSION=12.6.3
ARG CUDA_ARCHS="80;86;89;90"

# ---- build stages: one base per backend, chosen below by FROM build-${BACKEND} ----------------
FROM debian:12 AS build-cpu
FROM nvidia/cuda:${CUDA_VERSION}-devel-ubuntu24.04 AS build-cuda

FROM build-${BACKEND} AS build
ARG BACKEND
ARG CUDA_ARCHS
ARG RLX_COMMIT
ENV DEBIAN_FRONTEND=noninteractive
RUN apt-get update \
 && apt-get install -y --no-install-recommends \
      build-essential cmake pkg-config ca-certificates \
      libmicrohttpd-dev libuv1-dev libopenblas-dev libsqlite3-dev libcjson-dev \
      libpcre2-dev libutf8proc-dev libinih-dev libcurl4-openssl-dev \
 && rm -rf /var/lib/apt/lists/*
WORKDIR /src
COPY . .
# The build steps live in deploy/build-image.sh (tests run the same script without Docker):
# the shipped programs into /out/usr/local/bin, and the runtime packages they need in
# /out/usr/local/share/rlxd/runtime-packages.txt.
RUN BACKEND="$BACKEND" CUDA_ARCHS="$CUDA_ARCHS" RLX_COMMIT="$RLX_COMMIT" bash deploy/build-image.sh /out build

# ---- runtime stages --------------------------------------------------------------------------
FROM debian:12-slim AS runtime-cpu
FROM nvidia/cuda:${CUDA_VERSION}-runtime-ubuntu24.04 AS runtime-cuda

FROM runtime-${BACKEND}
ENV DEBIAN_FRONTEND=noninteractive
COPY --from=build /out/ /
# curl serves the HEALTHCHECK only.
RUN apt-get update \
 && xargs -a /usr/local/share/rlxd/runtime-packages.txt \
      apt-get install -y --no-install-recommends curl ca-certificates \
 && rm -rf /var/lib/apt/lists/* \
 && groupadd --system --gid 10001 rlxd \
 && useradd --system --uid 10001 --gid rlxd --home-dir /var/lib/rlxd --shell /usr/sbin/nologin rlxd \
 && mkdir -p /models /var/lib/rlxd /etc/rlxd \
 && chown rlxd:rlxd /var/lib/rlxd
USER 10001:10001
ENV RLXD_HOST=0.0.0.0 \
    RLXD_DB=/var/lib/rlxd/sessions.db \
    XDG_CACHE_HOME=/var/lib/rlxd/cache
WORKDIR /var/lib/rlxd
VOLUME ["/var/lib/rlxd"]
EXPOSE 8080
HEALTHCHECK --interval=15s --timeout=3s --start-period=120s --retries=3 \
  CMD curl -fsS http://127.0.0.1:8080/health || exit 1
ENTRYPOINT ["rlxd", "serve"]
CMD ["--models-dir", "/models"]

#!/usr/bin/env bash
# `make image-gpu`: the GPU image (target bench) built as users build it, `docker compose build bench`
# (here podman-compose). Where the CUDA base image cannot be pulled, it says so and builds again on
# the local Debian base (make image-test makes it), to reach what the build needs next: the CUDA
# wheel indexes. Exit status: that of the last build (0 only where the GPU image was built).
set -uo pipefail
cd "$(dirname "$0")/.."
BIN=${BIN:-.venv/bin}
CUDA_BASE=$(sed -n 's/^ARG CUDA_BASE=//p' docker/Dockerfile)
LOCAL_BASE=localhost/debian-base:bookworm
export GNNBENCH_IMAGE=${GNNBENCH_IMAGE:-localhost/gnnbench:gpu}
GNNBENCH_REVISION=$(git rev-parse HEAD)
export GNNBENCH_REVISION
say() { echo "image-gpu: $*"; }
build() {
  nice -n "${IMAGE_TEST_NICE:-15}" "$BIN/podman-compose" --podman-build-args "--network=host --force-rm $*" \
    -f docker-compose.yml build bench
}

say "building ${GNNBENCH_IMAGE} (target bench) on ${CUDA_BASE}"
build && { say "built ${GNNBENCH_IMAGE}"; exit 0; }
status=$?
if podman image exists "$CUDA_BASE"; then
  say "FAILED (exit ${status}) with the CUDA base present: see the build's output above"
  exit "$status"
fi
say "FAILED: the CUDA base image ${CUDA_BASE} cannot be pulled from this machine (no image registry"
say "reachable); the GPU image needs it, or the same image pulled elsewhere and loaded (podman load)."
podman image exists "$LOCAL_BASE" || { say "no ${LOCAL_BASE} either (make image-test makes it): stopping here"; exit "$status"; }
say "building again on ${LOCAL_BASE} in its place, with this machine's pip settings (docker/host_pip.py),"
say "to see what the GPU build needs next"
mapfile -t pip_options < <("$BIN/python" docker/host_pip.py)
build "--build-arg=CUDA_BASE=${LOCAL_BASE} $(printf '%q ' "${pip_options[@]}")" &&
  { say "built on ${LOCAL_BASE} (not a GPU image)"; exit 0; }
status=$?
say "FAILED (exit ${status}) on ${LOCAL_BASE}: the 'error: stack ...' line above names what it could not reach"
exit "$status"

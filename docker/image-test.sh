#!/usr/bin/env bash
# `make image-test`: builds the CPU image (target bench-cpu) with podman through docker-compose.yml,
# runs the smoke suite in it through the same file (`podman-compose run --rm bench-cpu`, what users
# run as `docker compose run bench-cpu`), and checks on the host what it left: docker/check_image_run.py.
# Needs podman (runc), mmdebstrap and podman-compose: `make image-test` installs them first.
#
#   GNNBENCH_CPU_IMAGE   the image's name (default: localhost/gnnbench:cpu)
#   IMAGE_TEST_DISK_GB   free disk the build needs under podman's storage (default: 30)
# Prints the build times (first and second build) and the image size.
set -euo pipefail
cd "$(dirname "$0")/.."
BIN=${BIN:-.venv/bin}
export GNNBENCH_CPU_IMAGE=${GNNBENCH_CPU_IMAGE:-localhost/gnnbench:cpu}
export GNNBENCH_UID GNNBENCH_GID GNNBENCH_REVISION
GNNBENCH_UID=$(id -u) GNNBENCH_GID=$(id -g)
GNNBENCH_REVISION=$(git rev-parse HEAD)$(git diff --quiet HEAD -- 2>/dev/null || echo "-dirty")
# podman's builder (buildah) reuses the image's last layer when only the GNNBENCH_REVISION build
# argument changed (seen: a commit touching only tests kept the previous revision). This file,
# copied in with docker/, makes a new revision a new layer.
echo "$GNNBENCH_REVISION" > docker/.revision
LOCAL_BASE=localhost/debian-base:bookworm
CPU_BASE=$(sed -n 's/^ARG CPU_BASE=//p' docker/Dockerfile)
NICE=(nice -n "${IMAGE_TEST_NICE:-15}")
say() { echo "image-test: $*"; }
fail() { echo "image-test: FAILED: $*" >&2; exit 1; }

# Disk: the image holds three stacks (the dgl stack's torch 2.2.1 from PyPI alone is ~5 GB).
storage=$(podman info --format '{{.Store.GraphRoot}}')
mkdir -p "$storage"
free_gb=$(( $(df --output=avail -k "$storage" | tail -1) / 1024 / 1024 ))
[ "$free_gb" -ge "${IMAGE_TEST_DISK_GB:-30}" ] ||
  fail "only ${free_gb} GB free under ${storage} (podman's storage); the build needs ${IMAGE_TEST_DISK_GB:-30} GB"

# The base: Debian bookworm-slim from Docker Hub where it can be pulled, else a local one made with
# mmdebstrap (same release: the same Python 3.11 as the local stacks, so pip's wheels fit).
if podman image exists "$CPU_BASE" || timeout 120 podman pull -q "$CPU_BASE" >/dev/null 2>&1; then
  base=$CPU_BASE
else
  base=$LOCAL_BASE
  if ! podman image exists "$LOCAL_BASE"; then
    say "cannot pull ${CPU_BASE} (no registry reachable); making ${LOCAL_BASE} with mmdebstrap"
    tar=$(mktemp -d)/base.tar
    "${NICE[@]}" mmdebstrap --variant=minbase bookworm "$tar"
    podman import "$tar" "$LOCAL_BASE" >/dev/null
    rm -rf "$(dirname "$tar")"
  fi
fi
say "base image ${base}"

# The build: the compose file's bench-cpu build section, plus this machine's pip (its wheel folders,
# indexes, CA bundle and pip's cache, docker/host_pip.py), host networking and the base.
mapfile -t pip_options < <("$BIN/python" docker/host_pip.py)
build_args=(--network=host --force-rm "--build-arg=CPU_BASE=${base}" "${pip_options[@]}")
build() {  # sets built_s
  local started=$SECONDS
  "${NICE[@]}" "$BIN/podman-compose" --podman-build-args "$(printf '%q ' "${build_args[@]}")" \
    -f docker-compose.yml build bench-cpu || fail "the build of ${GNNBENCH_CPU_IMAGE} failed (above)"
  built_s=$(( SECONDS - started ))
}
say "building ${GNNBENCH_CPU_IMAGE} (revision ${GNNBENCH_REVISION})"
build
first=$built_s
say "first build: ${first} s; building again (every layer should come from the cache)"
build
second=$built_s
size=$(podman image inspect --format '{{.Size}}' "$GNNBENCH_CPU_IMAGE")
say "build ${first} s, again ${second} s; image ${GNNBENCH_CPU_IMAGE}: $(( size / 1000000 )) MB"

# The run: the smoke suite through the compose file, as users run it.
mkdir -p results/runs
stamp=$(mktemp)
started=$SECONDS
"$BIN/podman-compose" -f docker-compose.yml run --rm bench-cpu ||
  fail "the smoke run in ${GNNBENCH_CPU_IMAGE} exited $? (above)"
say "smoke run: $(( SECONDS - started )) s"
result=$(find results/runs -maxdepth 1 -name 'smoke-*.json' -newer "$stamp" | sort | tail -1)
rm -f "$stamp"
[ -n "$result" ] || fail "the run wrote no results/runs/smoke-*.json on the host"

"$BIN/python" docker/check_image_run.py "$result" "$GNNBENCH_CPU_IMAGE" "$GNNBENCH_REVISION"
"$BIN/gnnbench" report "$result"

# The layers earlier builds left behind, no longer part of any tagged image (a stack rebuilt after
# its pins changed leaves GBs); only this Dockerfile's (its label), and never what a tag still uses.
podman image prune -f --filter label=org.opencontainers.image.title=gnnbench >/dev/null
say "ok: ${result}; podman's storage now $(du -sh "$storage" | cut -f1)"

#!/usr/bin/env bash
# Resolves a base image that docker/Dockerfile pins by version to its digest, and records it:
#   docker/resolve-digests.sh [CUDA_BASE]   -> docker/base-image.lock      (the GPU targets' base)
#   docker/resolve-digests.sh CPU_BASE      -> docker/cpu-base-image.lock  (bench-cpu's base)
# Build with `--build-arg CUDA_BASE="$(cat docker/base-image.lock)"` (or CPU_BASE=...) to pin by
# digest too. Needs a Docker client with buildx and access to the registry; the images workflow
# runs it before every build. No digest is written that this did not resolve.
set -euo pipefail
cd "$(dirname "$0")/.."
arg=${1:-CUDA_BASE}
case "$arg" in
  CUDA_BASE) lock=docker/base-image.lock ;;
  CPU_BASE) lock=docker/cpu-base-image.lock ;;
  *) echo "unknown base argument ${arg}: CUDA_BASE or CPU_BASE" >&2; exit 2 ;;
esac
base=$(sed -n "s/^ARG ${arg}=//p" docker/Dockerfile)
digest=$(docker buildx imagetools inspect "$base" --format '{{json .Manifest.Digest}}' | tr -d '"')
case "$digest" in
  sha256:*) ;;
  *) echo "could not resolve a digest for $base (got: $digest)" >&2; exit 1 ;;
esac
echo "${base}@${digest}" > "$lock"
echo "resolved ${base}@${digest} into ${lock}"

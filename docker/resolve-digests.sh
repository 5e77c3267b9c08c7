#!/usr/bin/env bash
# Resolves the CUDA base image that docker/Dockerfile pins by version to its digest, and records
# it in docker/base-image.lock; build with `--build-arg CUDA_BASE="$(cat docker/base-image.lock)"`
# to pin by digest too. Needs a Docker client with buildx and access to the registry; the images
# workflow runs it before every build. No digest is written that this did not resolve.
set -euo pipefail
cd "$(dirname "$0")/.."
base=$(sed -n 's/^ARG CUDA_BASE=//p' docker/Dockerfile)
digest=$(docker buildx imagetools inspect "$base" --format '{{json .Manifest.Digest}}' | tr -d '"')
case "$digest" in
  sha256:*) ;;
  *) echo "could not resolve a digest for $base (got: $digest)" >&2; exit 1 ;;
esac
echo "${base}@${digest}" > docker/base-image.lock
echo "resolved ${base}@${digest}"

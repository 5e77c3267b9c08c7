#!/bin/sh
# The system every gnnbench image starts from (Debian or Ubuntu): Python with venv and headers, g++
# for the pins built from source, and a home any user id can write to (compose runs the container
# as the host user, GNNBENCH_UID:GNNBENCH_GID, so that results on the host belong to that user).
set -eu
apt-get update
apt-get install -y --no-install-recommends python3 python3-venv python3-dev g++ git ca-certificates
rm -rf /var/lib/apt/lists/*
install -d -m 1777 /home/gnnbench /cache /data

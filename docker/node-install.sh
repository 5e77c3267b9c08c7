#!/usr/bin/env bash
# install.sh: gnnbench on a GPU node without internet, from the folder `gnnbench bundle` wrote
# (this file is docker/node-install.sh, copied in as install.sh). Needs nothing from the network.
#
#   ./install.sh [--suite NAME|PATH] [--python PATH] [--prefix DIR] [--stack NAME] [--no-run] [-- RUN OPTIONS]
#
#   --suite   the suite to run when installed (default: gpu; e.g. smoke, or a YAML path)
#   --python  the node's Python, with its own PyTorch (default: python3)
#   --prefix  where the environment, a copy of gnnbench, the dataset cache and the results go
#             (default: $GNNBENCH_NODE_PREFIX, else ~/gnnbench-node)
#   --stack   the name the node's interpreter is registered under (default: node)
#   --no-run  install and register only
#   after --   options for `gnnbench run` (e.g. -k 'dataset=cora')
#
# Steps: checks the Python against the bundle's target (bundle.json); makes a virtual environment on
# it that sees its site packages (the node's torch, and its torch-geometric where it has one, are
# used, never replaced; the bundle's torch is installed only where none imports); installs
# gnnbench (editable, from gnnbench/) and its dependencies from wheels/ (pip --no-index); the
# sampler: nothing where pyg-lib or torch-sparse imports, else the wheels for the node's torch
# (sampler/torch-VERSION+CUDA/), else a build from sampler/src/ (needs a C++ compiler and the
# Python headers); copies the prepared datasets (hub/) into the dataset cache; registers the
# environment's python (gnnbench stacks add); runs the suite in it. Writes PREFIX/env.sh: source
# it to run gnnbench again (. PREFIX/env.sh; gnnbench run smoke --stack node --no-install).
# Exit status: gnnbench run's (0 every cell ran or was skipped with its reason; 1 a cell failed);
# 2 when the bundle does not fit this node (one line saying why).
set -euo pipefail
BUNDLE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
PY=python3
PREFIX=${GNNBENCH_NODE_PREFIX:-$HOME/gnnbench-node}
SUITE=gpu
STACK=node
RUN=1
say() { echo "install: $*"; }
die() { echo "install: error: $*" >&2; exit 2; }
usage() { sed -n '2,/^set -euo/p' "${BASH_SOURCE[0]}" | sed '$d' | sed 's/^# \{0,1\}//'; }

while [ $# -gt 0 ]; do
  case $1 in
    --suite) SUITE=${2:?--suite needs a value}; shift 2 ;;
    --python) PY=${2:?--python needs a value}; shift 2 ;;
    --prefix) PREFIX=${2:?--prefix needs a value}; shift 2 ;;
    --stack) STACK=${2:?--stack needs a value}; shift 2 ;;
    --no-run) RUN=0; shift ;;
    -h|--help) usage; exit 0 ;;
    --) shift; break ;;
    *) die "unknown option $1 (./install.sh --help)" ;;
  esac
done
[ -f "$BUNDLE/bundle.json" ] || die "$BUNDLE has no bundle.json: run this script from the folder gnnbench bundle wrote"
command -v "$PY" >/dev/null || die "--python $PY: not found"
"$PY" -c 'import json, sys; sys.exit(not json.load(open(sys.argv[1])).get("complete"))' "$BUNDLE/bundle.json" ||
  die "$BUNDLE is incomplete (its writing was cut short): run gnnbench bundle again on the machine with internet"

# 1. the node's Python against the bundle's target
read -r want_py want_machine <<<"$("$PY" -c 'import json, sys; t = json.load(open(sys.argv[1]))["target"]; print(t["python"], t["platform"])' "$BUNDLE/bundle.json")"
read -r have_py have_machine <<<"$("$PY" -c 'import platform, sys; print("%d.%d" % sys.version_info[:2], platform.machine())')"
[ "$want_py $want_machine" = "$have_py $have_machine" ] ||
  die "this bundle is for Python $want_py on $want_machine; $PY is Python $have_py on $have_machine (on a machine with internet: gnnbench bundle DIR --python $have_py --platform $have_machine)"
say "[1/7] $PY: Python $have_py on $have_machine, as the bundle's target; installing into $PREFIX"

# 2. the environment: the node's site packages visible, so its torch is the one used
VENV=$PREFIX/venv
VPY=$VENV/bin/python
mkdir -p "$PREFIX"
if [ ! -x "$VPY" ]; then
  "$PY" -m venv --system-site-packages "$VENV" ||
    die "$PY -m venv failed: this Python lacks venv (Debian/Ubuntu: apt-get install python3-venv)"
fi
export PIP_CONFIG_FILE=/dev/null PIP_DISABLE_PIP_VERSION_CHECK=1 PIP_PROGRESS_BAR=off
install_() { "$VPY" -m pip install -q --no-index --find-links "$BUNDLE/wheels" "$@"; }
install_ "setuptools>=68" wheel
if "$VPY" -c 'import torch' 2>/dev/null; then
  say "[2/7] torch: the node's own, $("$VPY" -c 'import torch; print(torch.__version__, "CUDA", torch.version.cuda)') (not replaced)"
elif compgen -G "$BUNDLE/torch/torch-*.whl" >/dev/null; then
  say "[2/7] torch: none imports on this Python; installing the bundle's $(basename "$(compgen -G "$BUNDLE/torch/torch-*.whl" | head -1)")"
  install_ --find-links "$BUNDLE/torch" torch
else
  die "no torch imports on $PY and the bundle carries none: install the node's PyTorch first (or make the bundle with --with-torch)"
fi

# 3. gnnbench (editable from a copy: it finds suites/ and its pin files there) and its dependencies
say "[3/7] gnnbench and its dependencies from wheels/ (pip --no-index)"
rm -rf "$PREFIX/src"
cp -a "$BUNDLE/gnnbench" "$PREFIX/src"
chmod -R u+w "$PREFIX/src"
install_ --no-build-isolation -e "$PREFIX/src"
if ! "$VPY" -c 'import torch_geometric' 2>/dev/null; then
  install_ torch-geometric
fi
say "  torch-geometric $("$VPY" -c 'import torch_geometric; print(torch_geometric.__version__)')"

# 4. the sampler PyG's NeighborLoader needs: pyg-lib, else torch-sparse (with torch-scatter)
sampler() { "$VPY" -c 'import importlib.util as u; print(" ".join(m for m in ("pyg_lib", "torch_sparse") if u.find_spec(m)))'; }
sampler_imports() { "$VPY" -c 'import torch, importlib, sys; [importlib.import_module(m) for m in sys.argv[1:]]' $(sampler) 2>/dev/null; }
TAG=$("$VPY" -c 'import torch; c = torch.version.cuda; print("torch-" + torch.__version__.split("+")[0] + "+" + ("cu" + c.replace(".", "") if c else "cpu"))')
if [ -n "$(sampler)" ] && sampler_imports; then
  say "[4/7] sampler: $(sampler) already imports here"
else
  if compgen -G "$BUNDLE/sampler/$TAG/*.whl" >/dev/null; then
    say "[4/7] sampler: the bundle's wheels for $TAG: $(cd "$BUNDLE/sampler/$TAG" && echo *.whl)"
    install_ scipy
    "$VPY" -m pip install -q --no-index --no-deps "$BUNDLE/sampler/$TAG"/*.whl
  fi
  if [ -z "$(sampler)" ] || ! sampler_imports; then
    say "[4/7] sampler: no wheel fits $TAG; building torch-scatter and torch-sparse (CPU kernels only) from sampler/src (about 25 min on 2 cores, less with more)"
    if ! command -v c++ >/dev/null || ! "$VPY" -c 'import os, sysconfig; assert os.path.exists(os.path.join(sysconfig.get_paths()["include"], "Python.h"))' 2>/dev/null; then
      say "  cannot build here: no C++ compiler or no Python headers (apt-get install g++ python3-dev); PyG's cells will fail, each saying why"
    else
      # FORCE_ONLY_CPU=1: NeighborLoader samples on the CPU, so their CUDA kernels (hours to compile, and
      # a failure against CUDA 13) are never used. A CPU-only torch-scatter would break PyG's scatter
      # min/max on CUDA (PyG routes them to torch_scatter whenever it imports); gnnbench's PyG backends
      # route them back to torch's own scatter_reduce when torch-scatter has no CUDA kernels
      # (bench/backends/pyg_node.py: scatter_without_cpu_only_torch_scatter).
      FORCE_ONLY_CPU=1 MAX_JOBS=${MAX_JOBS:-$(nproc)} install_ --find-links "$BUNDLE/sampler/src" --no-build-isolation torch-scatter torch-sparse ||
        say "  the build failed (above); PyG's cells will fail, each saying why"
    fi
  fi
  [ -n "$(sampler)" ] && sampler_imports && say "  sampler: $(sampler) imports"
fi

# 5. the prepared datasets into the dataset cache (kept where already there)
CACHE=${GNNBENCH_CACHE:-$PREFIX/cache}
mkdir -p "$CACHE/datasets"
copied=()
for d in "$BUNDLE"/hub/datasets/*/; do
  [ -d "$d" ] || continue
  name=$(basename "$d")
  case $name in .*) continue ;; esac
  if [ ! -e "$CACHE/datasets/$name" ]; then
    cp -a "$d" "$CACHE/datasets/$name" && chmod -R u+w "$CACHE/datasets/$name"
    copied+=("$name")
  fi
done
say "[5/7] datasets in $CACHE: ${copied[*]:-none new}; $("$VPY" -c 'import json, sys; d = json.load(open(sys.argv[1]))["datasets"]; print("prepared in the bundle: " + (", ".join(d["prepared"]) or "none") + "; generated here on first use: " + (", ".join(d["generated_on_node"]) or "none"))' "$BUNDLE/bundle.json")"

# 6. register the environment's python as a stack
cat > "$PREFIX/env.sh" <<EOF
# gnnbench on this node: . $PREFIX/env.sh; then gnnbench run SUITE --stack $STACK --no-install
export GNNBENCH_CACHE=$CACHE
export GNNBENCH_STACKS_DIR=$PREFIX/stacks
export GNNBENCH_OFFLINE=1
export PATH=$VENV/bin:\$PATH
EOF
# shellcheck disable=SC1091
. "$PREFIX/env.sh"
say "[6/7] registering $VPY as stack $STACK"
gnnbench stacks add "$STACK" --python "$VPY"
if ! "$VPY" -c 'import dgl' 2>/dev/null; then
  say "  note: no DGL on this Python, so DGL GraphBolt's cells are not part of a run with --stack $STACK (only" \
      "PyG's are); a Python with DGL can be added as another stack: gnnbench stacks add NAME --python PATH, then --stack NAME too"
fi

[ "$RUN" = 1 ] || { say "installed; run with: . $PREFIX/env.sh; gnnbench run $SUITE --stack $STACK --no-install"; exit 0; }
say "[7/7] gnnbench run $SUITE --stack $STACK --no-install --results $PREFIX/results $*"
code=0
gnnbench run "$SUITE" --stack "$STACK" --no-install --results "$PREFIX/results" "$@" || code=$?
say "results in $PREFIX/results (exit $code); again: . $PREFIX/env.sh; gnnbench run SUITE --stack $STACK --no-install"
exit "$code"

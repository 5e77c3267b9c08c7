#!/usr/bin/env bash
# gnnbench's GPU suite on the lent H100, from the repository root (the device tool's working copy).
#   results/gpu-h100/run-on-the-lent-gpu.sh SECONDS (run as .devdata/gpu-run.sh, carried with .whl) [-k EXPR | --resume JOURNAL]...
# Installs what the image lacks (.whl: gnnbench's host dependencies and torch-scatter/torch-sparse
# built for this torch, CPU kernels only; with GNNBENCH_PYG_WHEELS set, a folder or index of pyg-lib
# wheels for this torch as pip's --find-links takes one, pyg-lib from there, and it stops unless PyG
# then samples with it: docs/gpus.md), registers the image's python as stack `node`, runs the
# suite until SECONDS less FIDELITY_S have passed (then interrupts it as Ctrl-C would: finished cells
# are kept, the journal resumes the rest), then the GPU fidelity pair, and leaves the run's files in $OUT.
set -u
export PYTHONUNBUFFERED=1
T0=$(date +%s)
BUDGET=${1:?seconds}; shift
log() { echo "[$(( $(date +%s) - T0 ))s] $*"; }
PY=${PY:-$(command -v python3)}
OUT=${OUT:-/tmp/out}; mkdir -p "$OUT/gpu"
log "python: $PY"
"$PY" -m pip install -q --no-index --no-deps --no-compile --no-cache-dir .whl/*.whl 2>&1 | grep -v "^WARNING" | tail -5
"$PY" -m pip install -q --no-index --no-deps --no-build-isolation -e . 2>&1 | grep -v "^WARNING" | tail -5
if [ -n "${GNNBENCH_PYG_WHEELS:-}" ]; then
  "$PY" -m pip install -q --no-index --no-deps --find-links "$GNNBENCH_PYG_WHEELS" pyg-lib 2>&1 | grep -v "^WARNING" | tail -5
  SAMPLER=$("$PY" -c "from bench.backends.pyg_node import neighbor_sampler_in_use as s; print(s())")
  log "sampler: $SAMPLER (pyg-lib from $GNNBENCH_PYG_WHEELS)"
  case "$SAMPLER" in pyg-lib*) ;; *) log "no pyg-lib from $GNNBENCH_PYG_WHEELS: stopping before the run"; exit 2;; esac
fi
"$PY" -c "import importlib.metadata as m, torch; print('torch', torch.__version__, 'CUDA', torch.version.cuda, 'available', torch.cuda.is_available(), *(f'{d} {m.version(d)}' for d in ('torch_geometric', 'pyg_lib', 'torch_sparse', 'torch_scatter', 'pydantic', 'lmdb') if __import__('importlib.util').util.find_spec(d)))"
(nvidia-smi; nvidia-smi topo -m; nproc; free -g) > "$OUT/machine.txt" 2>&1
export GNNBENCH_CACHE=/tmp/gcache GNNBENCH_STACKS_DIR=/tmp/gstacks GNNBENCH_OFFLINE=1 GNNBENCH_DATA_ROOT=$PWD/.devdata/data
GB=$(dirname "$PY")/gnnbench
"$GB" stacks add node --python "$PY" 2>&1 | tail -5
FIDELITY_S=${FIDELITY_S:-300}
RUN_S=$(( BUDGET - FIDELITY_S - ($(date +%s) - T0) ))
if [ "$RUN_S" -le 0 ]; then
  log "SECONDS ($BUDGET) leaves no time for the suite beside FIDELITY_S ($FIDELITY_S) and the install: give more or set FIDELITY_S lower"
  exit 2
fi
log "gnnbench run ${SUITE:-gpu} --stack node --no-install --results $OUT/gpu $*"
timeout -s INT -k 30 "$RUN_S" "$GB" run "${SUITE:-gpu}" --stack node --no-install --results "$OUT/gpu" "$@" > "$OUT/run.log" 2>&1
log "run exit $?"
tail -60 "$OUT/run.log"
# the GPU fidelity pair (docs/gpus.md): a cpu-cuda PyG node cell and PyG's plain loop in one process,
# paired epochs, in the last FIDELITY_S seconds of the budget (after the suite: a short loan measures
# the cells first; FIDELITY_S=0 leaves it out; FIDELITY_ROUNDS sets its rounds, 3 by default)
if [ "$FIDELITY_S" -gt 0 ]; then
  log "gnnbench fidelity gpu --stack node --side-by-side (at most ${FIDELITY_S}s)"
  timeout -s INT -k 30 "$FIDELITY_S" "$GB" fidelity gpu --stack node -k "backend=pyg-neighbor and mode=cpu-cuda and products-s21 and workers=4 and not pin_memory" --side-by-side --rounds "${FIDELITY_ROUNDS:-3}" --out "$OUT/gpu/fidelity-gpu-pyg-node.json" > "$OUT/fidelity.log" 2>&1
  log "fidelity exit $?"; tail -20 "$OUT/fidelity.log"
fi
ls -la "$OUT/gpu"

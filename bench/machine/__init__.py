"""The machine a cell runs on: what it has (usable cores, GPUs and their facts, its measured
ceilings), how a cell's share of it is set (core budget, GPU affinity, memory cgroup), and what was
used meanwhile (other work's load, GPU utilisation, a rank's memory by phase).

Below bench.run: the runner, the worker and the session ask here, nothing here runs a cell. Most
modules are stdlib-only at import, as the worker imports them inside every stack."""

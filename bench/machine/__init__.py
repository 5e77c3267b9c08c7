"""The machine a cell runs on, below bench.run: what it has (cores, GPUs, ceilings), a cell's share
of it (core budget, GPU affinity, memory cgroup) and what was used meanwhile (load, GPU
utilisation, memory by phase). Mostly stdlib-only at import: the worker imports it in every stack.
"""

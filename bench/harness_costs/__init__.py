"""What gnnbench's own machinery costs, measured: the harness against the plain loops the
frameworks' examples write (fidelity, plain_loops), the stage clocks (overhead), and converting a
user's graph into the hub (convert_benchmark).

Above bench.run: each of these runs cells, or processes in a cell's stack, through the runner and
the worker, as a benchmark of them."""

# The module of each task's plain loops: a backend's registry line (bench/backends/__init__.py
# BackendInfo.plain_loop) names a function in the module of its task. Plain data: the host (the
# registry test) and the stacks (plain_loops.loop_of) read it.
PLAIN_LOOP_MODULES = {
    "node": "bench.harness_costs.plain_loops",
    "typed-node": "bench.harness_costs.plain_loops_typed",
    "link": "bench.harness_costs.plain_loops_link",
}

"""What gnnbench's own machinery costs, measured: the harness against the plain loops the
frameworks' examples write (fidelity, plain_loops) and the stage clocks (overhead).

Above bench.run: each of these runs cells, or processes in a cell's stack, through the runner and
the worker, as a benchmark of them."""

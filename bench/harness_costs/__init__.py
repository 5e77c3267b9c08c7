"""What gnnbench's own machinery costs, measured: the harness against the plain loops the
frameworks' examples write, and the stage clocks (fidelity on the host, plain_loops in the stack).
Above bench.run: each runs cells, or processes in a cell's stack, as a benchmark of them."""

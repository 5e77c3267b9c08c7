"""Running cells: suite files expand to cells (suite), a session runs them (session), each cell is
made ready once (prepare: stacks, dataset, store, memory), the runner launches it in its stack's
interpreter (runner), the worker measures it there (worker), and record writes the result file."""

"""Running cells: suite files expand to cells (suite), a session runs them (session), the runner
launches each in its stack's interpreter (runner, stacks), and the worker measures it there."""

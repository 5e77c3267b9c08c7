"""`python -m bench.stacks install NAME...`: what `gnnbench stacks install` does, needing only this
package's __init__, bench.paths and bench.locks, so that the images install their stacks before the rest of
gnnbench is copied (docker/Dockerfile)."""

import sys

from bench.stacks import StackError, install

if sys.argv[1:2] != ["install"] or not sys.argv[2:]:
    sys.exit("usage: python -m bench.stacks install NAME...")
try:
    for stack_name in sys.argv[2:]:
        install(stack_name)
except StackError as e:
    sys.exit(f"error: {e}")

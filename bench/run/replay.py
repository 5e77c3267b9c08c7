"""Feeds epoch times measured inside a stack's worker to pytest-benchmark through its public API.

The epochs run in another interpreter, so pytest-benchmark cannot time them itself. Each test
marks itself with `pytest.mark.benchmark(timer=clock)`, loads the measured durations, and calls
`benchmark.pedantic(next_round, rounds=len(durations))`: pytest-benchmark reads `clock()` before
and after every round, and `next_round` advances the clock by exactly one measured epoch, so the
rounds, and every statistic computed from them, are the worker's epoch times.
"""

from __future__ import annotations

from collections import deque

_now = 0.0
_pending: deque[float] = deque()


def clock() -> float:
    return _now


def load(durations: list[float]) -> int:
    global _now
    if _pending:
        raise RuntimeError("replay: durations of a previous cell were not consumed")
    _now = 0.0
    _pending.extend(float(d) for d in durations)
    return len(_pending)


def next_round() -> None:
    global _now
    _now += _pending.popleft()

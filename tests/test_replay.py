"""pytest-benchmark's statistics for a cell are exactly the epoch times the worker measured."""

import json

pytest_plugins = ["pytester"]


def test_rounds_are_the_replayed_durations(pytester):
    pytester.makepyfile("""
        import pytest
        from bench.run import replay

        @pytest.mark.benchmark(timer=replay.clock, warmup=False)
        def test_epochs(benchmark):
            benchmark.pedantic(replay.next_round, rounds=replay.load([0.5, 0.25, 1.0, 0.75]), iterations=1)
    """)
    out = pytester.path / "out.json"
    result = pytester.runpytest("--benchmark-only", f"--benchmark-json={out}", "-p", "no:cacheprovider")
    result.assert_outcomes(passed=1)
    stats = json.loads(out.read_text())["benchmarks"][0]["stats"]
    assert stats["rounds"] == 4
    assert stats["data"] == [0.5, 0.25, 1.0, 0.75]
    assert stats["median"] == 0.625 and stats["min"] == 0.25 and stats["max"] == 1.0

"""The verdicts' statistics (bench/paired_ratio.py) against simulated launches: what differs between
launches (a per-launch offset), a drift within a launch, an order effect, heavy tails. The 95 %
interval over launches must hold 1.00 for identical work about as often as it claims, an A/A pair must
never read "faster" or "slower" beyond the band, and a planted slowdown must be found; the words
never say "same" unless the interval lies inside the band (also over every committed result file)."""

from __future__ import annotations

import json
import math
import random
from pathlib import Path

import pytest
from hypothesis import given, strategies as st

from bench import paired_ratio as pr
from bench.run import paired

REPO = Path(__file__).resolve().parent.parent


def simulate(rng: random.Random, true_log: float, launches: int = 6, rounds: int = 12, between: float = 0.02,
             noise: float = 0.03, drift: float = 0.0, order_effect: float = 0.01, spikes: float = 0.0) -> list:
    """One pair's launches as paired.run_group makes them: rounds of {"a": s, "b": s} in turn order, the
    first side alternating between launches. `between`: sigma of a per-launch offset of b against a (log);
    `drift`: log change per turn within a launch; `order_effect`: the second turn of a round runs this much
    slower; `spikes`: the chance a turn is caught by a burst (+30 %)."""
    made = []
    for number in range(launches):
        offset = rng.gauss(0.0, between)
        order = ("a", "b") if number % 2 == 0 else ("b", "a")
        rounds_made, turn = [], 0
        for _ in range(rounds):
            times = {}
            for position, side in enumerate(order):
                log = drift * turn + rng.gauss(0.0, noise) + order_effect * position
                if side == "b":
                    log += true_log + offset
                if rng.random() < spikes:
                    log += math.log(1.3)
                times[side] = math.exp(log)
                turn += 1
            rounds_made.append(times)
        made.append(rounds_made)
    return made


def results(true_log: float, n: int = 300, seed: int = 0, **kwargs) -> list[paired.PairResult]:
    rng = random.Random(seed)
    pair = paired.Pair("x", "a", "b")
    return [paired.paired_result(pair, simulate(rng, true_log, **kwargs), pr.TOLERANCE, {}, None) for _ in range(n)]


def coverage(found: list[paired.PairResult], true_ratio: float = 1.0) -> float:
    return sum(r.ci95[0] <= true_ratio <= r.ci95[1] for r in found) / len(found)


@pytest.mark.parametrize("conditions", [
    {},  # per-launch offsets (sigma 2 %), 3 % turn noise, an order effect
    {"drift": 0.004},  # and a machine that slows steadily within each launch
    {"spikes": 0.05, "noise": 0.05},  # and heavy tails: bursts on one turn in twenty
    {"between": 0.0, "noise": 0.02},  # no launch effect at all
], ids=["offsets", "drift", "heavy-tails", "no-launch-effect"])
def test_identical_work_is_held_by_the_interval_and_never_read_as_a_difference(conditions):
    found = results(0.0, **conditions)
    assert coverage(found) >= 0.90, coverage(found)
    wrong = [r for r in found if r.reading in (pr.SLOWER, pr.FASTER)]
    assert len(wrong) <= 0.01 * len(found), wrong[:3]
    assert all(pr.verdict(r.as_dict()).startswith(("same", "0.", "1.", "2.", "3.", "4.")) for r in found)


def test_a_one_launch_interval_would_not_hold_launch_offsets():
    """Why launches: the rounds of one launch carry none of its offset, so an interval over one launch's
    rounds (the old method) misses 1.00 far more often than 5 % when launches differ by 2 %."""
    rng = random.Random(1)
    pair = paired.Pair("x", "a", "b")
    missed = 0
    for _ in range(200):
        (launch,) = simulate(rng, 0.0, launches=1, rounds=40)
        logs = pr.sandwich_logs([(c, r[c]) for r in launch for c in r], "a", "b")
        chunks = [logs[i::4] for i in range(4)]  # the rounds' spread, as if they were launches
        _, found = pr.over_launches([pr.launch_estimate(c) for c in chunks])
        missed += not found[0] <= 1.0 <= found[1]
    assert missed > 0.2 * 200, missed
    assert paired.paired_result(pair, simulate(rng, 0.0, launches=1), 0.03, {}, None).ci95 is None


@pytest.mark.parametrize("slower, found_at_least", [(0.03, 0.5), (0.05, 0.8), (0.10, 0.95)])
def test_planted_slowdowns_are_found(slower, found_at_least):
    found = results(math.log(1 + slower), seed=2)
    leaning = sum(r.reading in (pr.SLOWER, pr.LEANS_SLOWER) for r in found) / len(found)
    assert leaning >= found_at_least, leaning
    assert coverage(found, 1 + slower) >= 0.90
    assert not any(r.reading in (pr.FASTER, pr.LEANS_FASTER, pr.SAME) for r in found if slower >= 0.10)


def test_the_sandwich_cancels_a_linear_drift():
    turns = [("a" if i % 2 == 0 else "b", math.exp(0.01 * i) * (1.05 if i % 2 else 1.0)) for i in range(20)]
    logs = pr.sandwich_logs(turns, "a", "b")
    assert logs == pytest.approx([math.log(1.05) if i % 2 == 0 else math.log(1.05) for i in range(len(logs))])
    assert len(logs) == 18
    plain = [math.log(b / a) for (_, a), (_, b) in zip(turns[::2], turns[1::2])]
    assert plain[0] == pytest.approx(math.log(1.05) + 0.01)  # the naive pair carries the drift


def test_t_quantiles():
    assert pr.t_quantile(0.975, 1) == pytest.approx(12.706, abs=0.002)
    assert pr.t_quantile(0.975, 5) == pytest.approx(2.571, abs=0.002)
    assert pr.t_quantile(0.975, 30) == pytest.approx(2.042, abs=0.002)
    assert pr.look_alpha(2) == pytest.approx(0.025)


# --- the words ---------------------------------------------------------------------------------

def pair_of(ratio, low, high, within=0.03, launches=6):
    return {"ratio": ratio, "ci95": [low, high], "within": within, "paired": True, "launches": launches, "rounds": 60}


def test_words_say_no_more_than_the_interval():
    assert pr.verdict(pair_of(1.031, 1.026, 1.035)) == "3.1% slower (+2.6% to +3.5%): slower, not surely beyond ±3%"
    assert pr.verdict(pair_of(1.06, 1.041, 1.079)) == "6.0% slower (+4.1% to +7.9%)"
    assert pr.verdict(pair_of(0.99, 0.985, 1.004)).startswith("same within ±3% (")
    unresolved = pr.verdict(pair_of(1.108, 0.99, 1.154))
    assert "unresolved, leans slower" in unresolved and "same" not in unresolved
    assert pr.verdict(pair_of(0.97, 0.95, 0.99)) == "3.0% faster (-5.0% to -1.0%): faster, not surely beyond ±3%"
    old = {k: v for k, v in pair_of(1.011, 1.004, 1.019).items() if k != "launches"}
    assert pr.verdict(old).endswith("one launch: the interval leaves out what differs between launches")


def test_the_band_is_symmetric_in_log_space():
    assert pr.band_state((1 / 1.03, 1.03)) == "inside"
    assert pr.band_state((0.97, 1.0)) is None  # 0.97 < 1/1.03: beyond the lower edge
    for ratio, low, high in [(1.04, 1.035, 1.05), (1.02, 1.01, 1.031), (1.0, 0.99, 1.01), (1.02, 0.99, 1.06)]:
        mirrored = pr.reading(1 / ratio, (1 / high, 1 / low))
        assert mirrored == pr.reading(ratio, (low, high)).replace("slower", "faster")


@given(st.floats(0.5, 2.0), st.floats(0.0, 0.3), st.floats(0.0, 0.3), st.floats(0.005, 0.2))
def test_same_only_inside_the_band(ratio, below, above, within):
    r = pair_of(ratio, ratio * (1 - below), ratio * (1 + above), within)
    said = pr.verdict(r)
    assert ("same" in said) == (pr.band_state(r["ci95"], within) == "inside")
    assert ("unresolved" in said) == (pr.reading(ratio, r["ci95"], within) == pr.UNRESOLVED)


def test_no_committed_verdict_says_same_outside_the_band():
    pairs = []
    for path in REPO.glob("results/**/*.json"):
        doc = json.loads(path.read_text())
        if isinstance(doc, dict):
            pairs += (doc.get("meta") or {}).get("pairs") or []
            for entry in doc.get("benchmarks") or []:
                pairs += (entry.get("extra_info") or {}).get("pairs") or []
    assert pairs, "the committed results hold paired runs"
    for pair in pairs:
        said = pr.verdict(pair)
        if "same" in said:
            assert pr.band_state(pair.get("ci95"), pair.get("within", pr.TOLERANCE)) == "inside", (said, pair)

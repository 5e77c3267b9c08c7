"""What the features alone predict: a ridge-regularised least-squares classifier on a node's own
features, fitted on the train split and scored on the test split once when a dataset is
materialised (`features_only_acc` in the card: a GNN's accuracy means something well above it).
"""

from __future__ import annotations

import contextlib

import numpy as np

RIDGE = 1e-3  # keeps the normal equations solvable when feature columns are collinear
MAX_TRAIN_ROWS = 200_000  # a sample of a larger train split fits the same plane
MAX_TEST_ROWS = 200_000
FIT_FRACTION = 0.9  # of the memory available now (as bench/run/memory_plan.py leaves a tenth)


def memory_bytes(train_rows: int, test_rows: int, dim: int, classes: int) -> int:
    """What features_only_accuracy holds at its peak, from the sizes alone."""
    train, test, width = min(train_rows, MAX_TRAIN_ROWS), min(test_rows, MAX_TEST_ROWS), dim + 1
    rows = lambda count: count * dim * 4 + 2 * count * width * 8  # noqa: E731
    return max(rows(train) + 2 * width * width * 8 + train * classes * 8 + 2 * width * classes * 8,
               rows(test) + width * classes * 8)


def available_bytes() -> int | None:
    """Memory available now: MemAvailable, or less where this process's cgroup (v2) allows less."""
    found = []
    with contextlib.suppress(OSError, ValueError, IndexError), open("/proc/meminfo") as meminfo:
        found += [int(line.split()[1]) * 1024 for line in meminfo if line.startswith("MemAvailable:")]
    with contextlib.suppress(OSError, ValueError, StopIteration, IndexError):
        with open("/proc/self/cgroup") as cgroup:
            path = next(line.split(":", 2)[2].strip() for line in cgroup if line.startswith("0::"))
        base = f"/sys/fs/cgroup{path}"
        with open(f"{base}/memory.max") as limit, open(f"{base}/memory.current") as used:
            most = limit.read().strip()
            if most != "max":
                found.append(max(0, int(most) - int(used.read().strip())))
    return min(found) if found else None


def refusal(train_rows: int, test_rows: int, dim: int, classes: int) -> tuple[int, int] | None:
    """(needed, available) bytes where the baseline would not fit in memory now, else None."""
    needed, available = memory_bytes(train_rows, test_rows, dim, classes), available_bytes()
    return None if available is None or needed <= FIT_FRACTION * available else (needed, available)


def features_only_accuracy(features: np.ndarray, labels: np.ndarray, train_idx: np.ndarray,
                           test_idx: np.ndarray, seed: int = 0) -> float | None:
    """Test accuracy of the least-squares linear classifier; None without train or test nodes."""
    if train_idx.size == 0 or test_idx.size == 0:
        return None
    rng = np.random.default_rng(seed)
    train = _sample(np.asarray(train_idx), MAX_TRAIN_ROWS, rng)
    test = _sample(np.asarray(test_idx), MAX_TEST_ROWS, rng)
    classes = int(labels.max()) + 1
    x = _with_bias(features[train])
    targets = np.zeros((train.size, classes))
    targets[np.arange(train.size), labels[train]] = 1.0
    gram = x.T @ x
    gram[np.diag_indices_from(gram)] += RIDGE * train.size
    weights = np.linalg.solve(gram, x.T @ targets)
    predicted = (_with_bias(features[test]) @ weights).argmax(axis=1)
    return float(np.mean(predicted == labels[test]))


def _sample(ids: np.ndarray, most: int, rng: np.random.Generator) -> np.ndarray:
    return np.sort(rng.choice(ids, most, replace=False)) if ids.size > most else ids


def _with_bias(rows: np.ndarray) -> np.ndarray:
    rows = np.asarray(rows, dtype=np.float64).reshape(rows.shape[0], -1)
    return np.hstack([rows, np.ones((rows.shape[0], 1))])

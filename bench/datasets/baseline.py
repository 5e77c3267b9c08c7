"""What the features alone predict: a linear classifier on a node's own features, no graph.

Least squares onto one-hot labels (a ridge-regularised linear classifier), fitted on the train
split and scored on the test split, in numpy, once when a dataset is materialised. Stored in the
dataset card as `features_only_acc`: a GNN's accuracy means something only well above it.
"""

from __future__ import annotations

import numpy as np

RIDGE = 1e-3  # keeps the normal equations solvable when feature columns are collinear
MAX_TRAIN_ROWS = 200_000  # a sample of a larger train split fits the same plane
MAX_TEST_ROWS = 200_000


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

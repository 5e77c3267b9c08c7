"""A training backend on a small model, for scripts run in a framework's stack: the shared
bench/backends/base.py build_model (Adam, DDP and its all-reduce timer) as every training backend
runs it, without a dataset (tests/test_weight_decay.py, tests/test_comm_hook.py)."""

from __future__ import annotations

import torch

from bench.backends import base
from bench.settings import CellSettings


class Small(base.TrainingPipeline):
    count = work = _loader = forward = staticmethod(lambda *args: None)

    def make_model(self, data):
        return torch.nn.Linear(64, 64)


def built(**settings) -> Small:
    pipe = Small({}, CellSettings(**settings))
    pipe.build_model({})
    return pipe

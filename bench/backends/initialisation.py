"""The one initialisation every task's model starts from, in both frameworks (what each cell
records as `model.init`). Its own module: bench/backends/base.py and typed.py both use it.
Imported inside the stacks only; torch is imported where it is used."""

from __future__ import annotations


# recorded with each cell: bench/run/worker.py model_summary
INITIALISATION = "kaiming-uniform(a=sqrt(5)) weights, zero biases, N(0, 1) embeddings"


def same_start(model) -> None:
    """One initialisation on both sides, in place of each framework's own (PyG's layers start from
    Kaiming-uniform weights, DGL's from Xavier with ReLU's gain, about twice the scale: started
    apart, the link models learned at different speeds, validation MRR 0.13 against 0.19 after 6
    epochs on rmat-s11; the node and typed models' accuracies a few points apart after a few
    epochs): every weight matrix and attention vector as torch.nn.Linear starts its weight
    (Kaiming-uniform with a = sqrt(5): U(+-1/sqrt(fan_in)), which PyG's SAGEConv keeps), every
    bias zero, each embedding N(0, 1) (torch's default). Parameters are matched by shape, which
    is the same on both sides (tests/test_parity.py loads one side's weights into the other's)."""
    import math

    import torch

    with torch.no_grad():
        for name, p in model.named_parameters():
            if name.startswith("embeddings.") or ".embeddings." in name:
                continue
            if p.dim() >= 2:
                torch.nn.init.kaiming_uniform_(p, a=math.sqrt(5))
            else:
                p.zero_()

"""The one initialisation every task's model starts from, in both frameworks (what each cell
records as `model.init`). Stack side; torch is imported where it is used.
"""

from __future__ import annotations

INITIALISATION = "kaiming-uniform(a=sqrt(5)) weights, zero biases, N(0, 1) embeddings"


def same_start(model) -> None:
    """One initialisation on both sides, in place of each framework's own (DGL's Xavier starts at
    about twice PyG's scale, and models started apart learn at different speeds): weights as
    torch.nn.Linear's (Kaiming-uniform, a = sqrt(5)), biases zero, embeddings N(0, 1)."""
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

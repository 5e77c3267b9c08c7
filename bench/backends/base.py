"""What every backend provides to the worker, and the model settings they share.

A backend turns the hub's arrays into its framework's own structures, and exposes:
  train_loader        an iterable of batches (re-iterated every epoch)
  count(batch)        (seed nodes, sampled edges) of one batch
  step(batch)         one training step (or, with model "none", nothing: the loader alone)
  evaluate(split)     accuracy on "val" or "test" with the same sampler settings
  synchronize()       wait for the device, so clocks read after it are honest
Both backends train the same GraphSAGE: len(fanout) mean-aggregation layers, ReLU and dropout
between them, Adam with the suite's learning rate.
"""

from __future__ import annotations

DROPOUT = 0.5


def graphsage(conv, in_dim: int, hidden: int, out_dim: int, num_layers: int):
    """The one GraphSAGE both backends train; `conv(a, b)` makes a framework's mean-aggregation
    SAGEConv from a to b features, and the model is called as model(x, [graph per layer])."""
    import torch
    import torch.nn.functional as F

    class GraphSAGE(torch.nn.Module):
        def __init__(self):
            super().__init__()
            dims = [in_dim] + [hidden] * (num_layers - 1) + [out_dim]
            self.convs = torch.nn.ModuleList(conv(a, b) for a, b in zip(dims, dims[1:]))

        def forward(self, x, graphs):
            for i, (layer, graph) in enumerate(zip(self.convs, graphs)):
                x = layer(x, graph)
                if i < len(self.convs) - 1:
                    x = F.dropout(F.relu(x), p=DROPOUT, training=self.training)
            return x

    return GraphSAGE()


def unavailable_reason(mode: str) -> str | None:
    """Why a mode cannot run in this interpreter, or None. Imported inside a stack."""
    import torch

    if mode != "cpu-cpu" and not torch.cuda.is_available():
        return (f"mode {mode} needs a CUDA GPU and a CUDA build of the framework; "
                f"this process sees none (torch {torch.__version__})")
    return None


def device_of(mode: str):
    import torch

    return torch.device("cpu" if mode.endswith("-cpu") else "cuda")

"""What the link-prediction backends share (pyg-link, dgl-graphbolt-link): the model (the node
GraphSAGE as encoder, a dot-product or MLP decoder, BCE loss), the ranking metrics and the leakage
check. Evaluation: full-neighbourhood embeddings over the training graph, each held-out positive
ranked against the stored negatives by the split's protocol (bench/datasets/link_split.py): MRR and
Hits@K with OGB's rank, or against one shared set Hits@K as OGB's evaluator counts it. Leakage:
the first epoch's sampled edges against the batch's own seed edges and reverses; with exclusion
`reverse` one found fails the cell, with `none` the share is recorded. Stack side.
"""

from __future__ import annotations

import os

import numpy as np

from bench.backends import base
from bench.datasets import link_split

HITS_AT = (10, 50, 100)
# a test hook: "1" builds the pipeline without its exclusion step while the cell still says `reverse`
PLANT_LEAK_ENV = "GNNBENCH_PLANT_LEAK"
NO_FILTER_NOTE = ("negatives are drawn uniformly and not filtered: a drawn pair may be a true edge "
                  "(neither framework filters false negatives)")


class SeedEdgeLeakError(RuntimeError):
    """A batch's sampled graph still holds one of its own positive seed edges (or its reverse)."""


def seed_edges_found(sampled_src, sampled_dst, seed_src, seed_dst, num_nodes: int) -> np.ndarray:
    """Which sampled edges (global ids) are a seed edge or the reverse of one: a bool mask."""
    n = np.int64(num_nodes)
    sampled_src, sampled_dst, seed_src, seed_dst = (np.asarray(a, dtype=np.int64)
                                                    for a in (sampled_src, sampled_dst, seed_src, seed_dst))
    seeds = np.concatenate([seed_src * n + seed_dst, seed_dst * n + seed_src])
    return np.isin(sampled_src * n + sampled_dst, seeds)


def protocol_figure(split, metrics: dict) -> float | None:
    """The one figure a split's protocol scores by (what time-to-target trains to)."""
    return metrics["hits@50"] if split.protocol == "hits@50" else metrics["mrr"]


EVAL_PAIRS_AT_ONCE = 1 << 18  # pairs scored at a time: 1,000 negatives per positive (citation2) stay in memory


def split_scores(split, name: str, score_pairs, device=None):
    """(positive scores [P], negative scores [P, K] or shared [M]) under `score_pairs(src, dst)`, in blocks."""
    import torch

    def scored(src, dst):
        out = [score_pairs(src[i:i + EVAL_PAIRS_AT_ONCE], dst[i:i + EVAL_PAIRS_AT_ONCE]).float()
               for i in range(0, len(src), EVAL_PAIRS_AT_ONCE)]
        return torch.cat(out) if out else torch.zeros(0, device=device)

    pos = torch.from_numpy(np.asarray(split.positives(name))).to(device)
    neg = torch.from_numpy(np.asarray(split.negatives(name))).to(device)
    with torch.no_grad():
        pos_scores = scored(pos[:, 0], pos[:, 1])
        if split.shared_negatives:
            return pos_scores, scored(neg[:, 0], neg[:, 1])
        per_block = max(1, EVAL_PAIRS_AT_ONCE // max(1, neg.shape[1]))
        blocks = [scored(pos[i:i + per_block, 0].repeat_interleave(neg.shape[1]),
                         neg[i:i + per_block].reshape(-1)).reshape(-1, neg.shape[1])
                  for i in range(0, len(pos), per_block)]
        return pos_scores, (torch.cat(blocks) if blocks else torch.zeros(0, neg.shape[1], device=device))


def protocol_metrics(split, pos_scores, neg_scores) -> dict:
    """MRR and Hits@K (K = HITS_AT) of a split's scores by its protocol: each positive's OGB rank among
    its own negatives (ties: optimistic and pessimistic averaged), or against negatives every
    positive shares (ogbl-collab) Hits@K alone, as OGB's evaluator counts it."""
    import torch

    if pos_scores.numel() == 0:
        return {"mrr": None, **{f"hits@{k}": None for k in HITS_AT}}
    if split.shared_negatives:
        ordered = torch.sort(neg_scores.reshape(-1)).values
        # negatives scored at least as high as each positive: at most K - 1 of them is a hit at K
        at_least = ordered.numel() - torch.searchsorted(ordered, pos_scores.reshape(-1).contiguous(), right=False)
        return {"mrr": None, **{f"hits@{k}": float((at_least < k).float().mean()) for k in HITS_AT}}
    pos = pos_scores.reshape(-1, 1)
    rank = (0.5 * ((neg_scores > pos).sum(dim=1) + (neg_scores >= pos).sum(dim=1)).float() + 1).cpu()
    return {"mrr": float((1.0 / rank).mean()), **{f"hits@{k}": float((rank <= k).float().mean()) for k in HITS_AT}}


def link_model(encoder, hidden: int, decoder: str):
    """The encoder and a decoder: model(x, graphs) the embeddings, model(x, graphs, src, dst) the
    pairs' logits, model.score(h_u, h_v) the logits of embeddings."""
    import torch

    class LinkModel(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.encoder = encoder
            self.mlp = (torch.nn.Sequential(torch.nn.Linear(hidden, hidden), torch.nn.ReLU(),
                                            torch.nn.Linear(hidden, 1)) if decoder == "mlp" else None)

        @property
        def convs(self):
            return self.encoder.convs

        def forward(self, x, graphs, src=None, dst=None):
            """Node embeddings, or the scores of pairs (inside forward, so DDP sees the decoder used)."""
            h = self.encoder(x, graphs)
            return h if src is None else self.score(h[src], h[dst])

        def score(self, h_src, h_dst):
            return (h_src * h_dst).sum(dim=-1) if self.mlp is None else self.mlp(h_src * h_dst).squeeze(-1)

    model = LinkModel()
    base.same_start(model)  # the decoder too (the encoder started so already)
    return model


class LinkPipeline(base.LinkHooks):
    """Mixed in before a framework's node pipeline: the link task around its base.LinkHooks."""
    leaks_checked = False  # True once check_leaks_apart checked an epoch's batches: no epoch checks them again

    def link_init(self, data) -> None:
        """The split and the leak counts (before the node pipeline builds on the split)."""
        self.data = data
        self.split = link_split.load(data.path)
        self.leaks = {"batches": 0, "leaked_batches": 0, "sampled_edges": 0, "leaked_edges": 0}
        self.planted = os.environ.get(PLANT_LEAK_ENV, "") not in ("", "0")

    @property
    def excludes(self) -> bool:
        """Whether the pipeline is built with its exclusion step (a planted leak leaves it out)."""
        return self.settings.exclusion == "reverse" and not self.planted

    def make_model(self, data):
        hidden = self.settings.hidden
        return link_model(self.sage(self.conv_factory(), data.features.shape[1], hidden), hidden,
                          self.settings.decoder)

    @staticmethod
    def loss(out, target):
        """Binary cross-entropy of the pairs' logits."""
        import torch.nn.functional as F

        return F.binary_cross_entropy_with_logits(out.float(), target.float())

    def forward(self, model, batch):
        """(logits of the positives then the negatives, their labels 1 and 0)."""
        import torch

        x, graphs = self.inputs(batch)
        pos_src, pos_dst, neg_src, neg_dst = self.pairs(batch)
        scores = model(x, graphs, torch.cat([pos_src, neg_src]), torch.cat([pos_dst, neg_dst]))
        labels = torch.zeros_like(scores)
        labels[:len(pos_src)] = 1
        return scores, labels

    def check_leaks_apart(self) -> None:
        """With warmup_epochs 0 (every epoch measured): the leak check over one epoch's batches, sampled and
        not trained, before them (bench/run/worker.py), so that no measured epoch pays it (10-25 %)."""
        if self.settings.warmup_epochs == 0:
            for batch in self.train_loader:
                self.check_leak(batch, *self.sampled_edges(batch))
            self.leaks_checked = True

    def count(self, batch) -> tuple[int, int]:
        """(positive seed edges, sampled edges); the first epoch's batches are checked for leaks (the
        pipeline is the same every epoch; on every batch the check cost 10-25 %), unless checked apart."""
        if self.epoch == 0 and not self.leaks_checked:
            src, dst = self.sampled_edges(batch)
            self.check_leak(batch, src, dst)
            return self.positives(batch), int(len(src))
        return self.positives(batch), self.sampled_edge_count(batch)

    def check_leak(self, batch, src, dst) -> None:
        """Count the batch's sampled edges that are its seed edges; with exclusion, one fails the cell."""
        seed_src, seed_dst = self.seed_pairs(batch)
        found = seed_edges_found(src, dst, seed_src, seed_dst, self.split.num_nodes)
        leaked = int(found.sum())
        self.leaks["batches"] += 1
        self.leaks["sampled_edges"] += int(len(src))
        if leaked:
            self.leaks["leaked_batches"] += 1
            self.leaks["leaked_edges"] += leaked
            if self.settings.exclusion != "none":
                i = int(np.flatnonzero(found)[0])
                raise SeedEdgeLeakError(
                    f"seed-edge leak with exclusion {self.settings.exclusion}: a training batch's sampled "
                    f"graph still holds {leaked} of its own positive seed edges or their reverses (e.g. "
                    f"{int(np.asarray(src)[i])} -> {int(np.asarray(dst)[i])}); the pipeline did not exclude them")

    def notes(self) -> list[str]:
        """What a reader of this cell's accuracy must know."""
        out = [NO_FILTER_NOTE]
        if self.split.meta.get("given"):  # OGB's or the user's split: scored by its own protocol
            out.append(f"the dataset's own edge split, scored by its protocol: {link_split.PROTOCOLS[self.split.protocol]}")
        if self.settings.exclusion == "none":
            out.insert(0, "exclusion none: the accuracy includes the leak: {leaked_batches} of {batches} "
                          "training batches of the first epoch sampled their own positive seed edges or reverses "
                          "({leaked_edges} of {sampled_edges} sampled edges)".format(**self.leaks))
        if self.settings.neg_mode == "binary":
            out.append("neg_mode binary (PyG's default): negatives draw both ends; GraphBolt's "
                       "sample_uniform_negative keeps the source (triplet)")
        return out

    def embeddings(self):
        """(every node's full-neighbourhood embedding, the unwrapped model)."""
        model = base.unwrap(self.model)
        return self.full_embeddings(model.convs, self.split, self.data), model

    def split_metrics(self, split: str, h=None, model=None) -> dict:
        """MRR and Hits@K of a split, by its protocol (`protocol_metrics`)."""
        if h is None:
            h, model = self.embeddings()
        pos, neg = split_scores(self.split, split, lambda s, d: model.score(h[s], h[d]), h.device)
        return protocol_metrics(self.split, pos, neg)

    def evaluate(self, split: str) -> float | None:
        """The split's figure by its protocol (what time to target trains to)."""
        return None if self.model is None else protocol_figure(self.split, self.split_metrics(split))

    def count_correct(self, split: str) -> tuple[float, int]:
        """(the figure times the positives, positives): summed over ranks, their ratio is the figure."""
        total = len(self.split.positives(split))
        figure = protocol_figure(self.split, self.split_metrics(split))
        return (figure or 0.0) * total, total

    def full_accuracy(self, data, split: str = "test"):
        """None: a link cell reports link_metrics instead."""
        return None

    def link_metrics(self) -> dict:
        """What the cell records: MRR and Hits@K on validation and test, the split and the notes."""
        out = {"link_split": self.split.card(), "link_notes": self.notes(), "leaks": dict(self.leaks)}
        if self.model is None:
            return out
        h, model = self.embeddings()
        for split in ("val", "test"):
            metrics = self.split_metrics(split, h, model)
            out[f"{split}_mrr"] = metrics.pop("mrr")
            out[f"{split}_hits"] = {k.removeprefix("hits@"): v for k, v in metrics.items()}
        return out

"""PyG link prediction: `LinkNeighborLoader` over the link split's training graph with
`NegativeSampling` (triplet or binary), GraphSAGE from `SAGEConv` as the encoder (the rest:
bench/backends/link.py). LinkNeighborLoader has no seed-edge exclusion: with `exclusion: reverse` a
step right after its sampler (`ExcludeSeedEdges`) does what GraphBolt's exclude_seed_edges does.
"""

from __future__ import annotations

import dataclasses

import torch
from torch_geometric.loader import LinkNeighborLoader
from torch_geometric.sampler import NegativeSampling

from bench.backends import link, stages
from bench.backends.base import shard
from bench.backends.pyg_node import PygNodePipeline, pyg_graph, sampled_per_hop


class Pipeline(link.LinkPipeline, PygNodePipeline):

    def __init__(self, data, settings):
        PygNodePipeline.__init__(self, data, settings)
        self.link_init(data)
        self.graph = pyg_graph(data, settings.store, "link", self.split)
        self.train_pos = shard(self.split.train_pos, settings.seed)
        self.train_loader = self._loader("train", shuffle=True, num_workers=settings.num_workers)
        sampler = self.train_loader.link_sampler
        if self.excludes:  # after the sampler, inside its clock: as GraphBolt's exclusion after its sampling
            sampler.sample_from_edges = ExcludeSeedEdges(sampler.sample_from_edges, self.split.num_nodes,
                                                         self.settings.neg_mode)
        if self.profile:
            sampler.sample_from_edges = stages.timed(sampler.sample_from_edges, "sample")
            self.train_loader.filter_fn = stages.timed(self.train_loader.filter_fn, "fetch")
        self.build_model(data)

    def _loader(self, split: str, shuffle: bool, num_workers: int = 0) -> LinkNeighborLoader:
        # is_sorted: the split's edges are in CSC order already
        neg = NegativeSampling(self.settings.neg_mode, amount=self.settings.neg_ratio)
        label_index = torch.from_numpy(self.train_pos.T.copy())
        if isinstance(self.graph, tuple):  # a remote backend takes (edge type, index): None, homogeneous
            label_index = (None, label_index)
        return LinkNeighborLoader(
            self.graph, num_neighbors=list(self.settings.fanout), is_sorted=True,
            edge_label_index=label_index, neg_sampling=neg,
            batch_size=self.settings.batch_size, shuffle=shuffle, num_workers=num_workers,
            persistent_workers=num_workers > 0, pin_memory=bool(self.settings.pin_memory))

    def inputs(self, batch):
        return batch.x, self._layers(batch)

    @staticmethod
    def pairs(batch):
        if "src_index" in batch:  # triplet
            neg_dst = batch.dst_neg_index.reshape(len(batch.src_index), -1)
            return (batch.src_index, batch.dst_pos_index, batch.src_index.repeat_interleave(neg_dst.shape[1]),
                    neg_dst.reshape(-1))
        num_pos = int(batch.input_id.numel())  # binary: the positives first, then the negatives
        index = batch.edge_label_index
        return index[0, :num_pos], index[1, :num_pos], index[0, num_pos:], index[1, num_pos:]

    def seed_pairs(self, batch):
        src, dst = self.pairs(batch)[:2]
        return batch.n_id[src].numpy(), batch.n_id[dst].numpy()

    @staticmethod
    def sampled_edges(batch):
        return batch.n_id[batch.edge_index[0]].numpy(), batch.n_id[batch.edge_index[1]].numpy()

    @staticmethod
    def sampled_edge_count(batch) -> int:
        return int(batch.edge_index.shape[1])

    @staticmethod
    def positives(batch) -> int:
        return int(batch.input_id.numel())

    def work(self, batch):
        """As pyg-neighbor's, around the unique ends of its positives and negatives (numbered first)."""
        index = batch.edge_label_index if "edge_label_index" in batch else torch.cat(
            [batch.src_index, batch.dst_pos_index, batch.dst_neg_index.reshape(-1)])
        seeds = int(index.max()) + 1
        rows = int(batch.x.shape[0])
        hop_nodes, hop_edges = sampled_per_hop(batch, len(self.settings.fanout), rows, seeds=seeds)
        negatives = int(batch.dst_neg_index.numel()) if "dst_neg_index" in batch else \
            int(batch.edge_label_index.shape[1]) - self.positives(batch)
        return stages.subgraph_work(hop_nodes, hop_edges, rows, stages.tensor_bytes([batch.x]),
                                    self.settings.model != "none", seed_edges=self.positives(batch), negatives=negatives)


class ExcludeSeedEdges:
    """LinkNeighborLoader's sampler, then its SamplerOutput less the sampled edges that are one of
    the batch's positive seed edges or a reverse (picklable, for DataLoader workers)."""

    def __init__(self, sample_from_edges, num_nodes: int, neg_mode: str):
        self.sample_from_edges, self.num_nodes, self.neg_mode = sample_from_edges, num_nodes, neg_mode

    def __call__(self, *args, **kwargs):
        out = self.sample_from_edges(*args, **kwargs)
        if self.neg_mode == "triplet":
            _, src_index, dst_pos_index = out.metadata[:3]
        else:
            input_id, label_index = out.metadata[:2]
            src_index, dst_pos_index = label_index[0, :input_id.numel()], label_index[1, :input_id.numel()]
        n, node = self.num_nodes, out.node
        pos_src, pos_dst = node[src_index], node[dst_pos_index]
        seeds = torch.cat([pos_src * n + pos_dst, pos_dst * n + pos_src])
        keep = ~torch.isin(node[out.row] * n + node[out.col], seeds)
        if bool(keep.all()):
            return out
        hops = out.num_sampled_edges  # per hop, as the work counts read them: each hop less its excluded edges
        if hops is not None:
            hops = [int(k.sum()) for k in torch.split(keep, [int(h) for h in hops])]
        return dataclasses.replace(out, row=out.row[keep], col=out.col[keep], num_sampled_edges=hops,
                                   edge=None if out.edge is None else out.edge[keep])

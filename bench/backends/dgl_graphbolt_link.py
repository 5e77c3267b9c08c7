"""DGL GraphBolt link prediction, as DGL 2.1's graphbolt/link_prediction.py builds it: training
edges -> ItemSampler -> sample_uniform_negative -> sample_neighbor -> exclude_seed_edges (exclusion
`reverse`; the three in the `sample` stage) -> fetch_feature -> copy_to, over the split's training
graph. Modes, stores and clocks are dgl_graphbolt's; the rest the link task's (link.py).
"""

from __future__ import annotations

from functools import partial

import dgl
import dgl.graphbolt as gb
import numpy as np
import torch

from bench.backends import dgl_graphbolt, layer_edges, link
from bench.backends.dgl_graphbolt import block_work, placed


class Pipeline(link.LinkPipeline, dgl_graphbolt.Pipeline):
    sampler = f"graphbolt sample_uniform_negative + sample_neighbor (dgl {dgl.__version__})"
    seed_name = "node_pairs"

    def __init__(self, data, settings):
        if settings.neg_mode != "triplet":
            raise dgl_graphbolt.Unavailable("GraphBolt's sample_uniform_negative keeps each positive's source "
                                            "(neg_mode triplet); it has no binary mode")
        self.link_init(data)  # the split the graph and the seeds are taken from
        super().__init__(data, settings)

    def place(self, data):
        """The training graph (the split's message-passing edges), where the mode keeps it."""
        split = self.split
        return placed(data, self.settings, self.device, self.mode, (split.graphbolt_indptr, split.graphbolt_indices))

    def item_sets(self, data) -> dict:
        # every rank gives the whole set: DistributedItemSampler shares it out (dgl_graphbolt._loader)
        pairs = torch.from_numpy(np.ascontiguousarray(self.split.train_pos)).to(self.graph.indices.dtype)
        return {"train": gb.ItemSet(pairs, names="node_pairs")}

    def _sample(self, pipe):
        pipe = pipe.sample_uniform_negative(self.graph, self.settings.neg_ratio)
        pipe = pipe.sample_neighbor(self.graph, self.fanouts())
        if self.excludes:
            pipe = pipe.transform(partial(gb.exclude_seed_edges, include_reverse_edges=True))
        return pipe

    def inputs(self, minibatch):
        return minibatch.node_features["feat"], layer_edges.blocks(minibatch, self.same_layer_edges)

    @staticmethod
    def pairs(minibatch):
        pos_src, pos_dst = minibatch.compacted_node_pairs
        neg_dst = minibatch.compacted_negative_dsts  # [positives, neg_ratio]
        neg_src = pos_src.repeat_interleave(neg_dst.shape[1])  # triplet: the positive's source (negative_srcs is None)
        return pos_src, pos_dst, neg_src, neg_dst.reshape(-1)

    def seed_pairs(self, minibatch):
        src, dst = minibatch.node_pairs
        return src.cpu().numpy(), dst.cpu().numpy()

    def sampled_edges(self, minibatch):
        blocks = minibatch.sampled_subgraphs
        srcs = [b.original_row_node_ids[b.sampled_csc.indices.long()].cpu() for b in blocks]
        dsts = [b.original_column_node_ids.repeat_interleave(b.sampled_csc.indptr.diff()).cpu() for b in blocks]
        return torch.cat(srcs).numpy(), torch.cat(dsts).numpy()

    @staticmethod
    def sampled_edge_count(minibatch) -> int:
        return sum(int(block.sampled_csc.indices.numel()) for block in minibatch.sampled_subgraphs)

    @staticmethod
    def positives(minibatch) -> int:
        return int(minibatch.node_pairs[0].numel())

    def notes(self) -> list[str]:
        out = super().notes()
        if len(self.settings.fanout) > 1 and self.same_layer_edges:
            out.append("GraphBolt samples every hop again for all nodes reached before it (the seeds' second hop "
                       "too: more sampled edges than PyG's, named by the equal-work check); its layers compute "
                       "over each node's edges from the hop that first sampled it, as PyG's do (same_layer_edges "
                       "true, not the minibatch.blocks DGL's own link example trains on: with those the seeds' "
                       "input layer sees the last fanout's resampled edges and MRR trailed PyG's by 0.03-0.05)")
        elif len(self.settings.fanout) > 1:
            out.append("same_layer_edges false: GraphBolt's layers compute over its minibatch.blocks (each hop sampled "
                       "again for all nodes reached before it), not the edges PyG's compute over: two different GNNs")
        return out

    def work(self, minibatch):
        """As the node backend's, with the seed edges and negatives."""
        seeds = int(minibatch.sampled_subgraphs[-1].original_column_node_ids.numel())  # the pairs' unique ends
        return block_work(minibatch, seeds, self.settings.model != "none", self.same_layer_edges,
                          seed_edges=self.positives(minibatch), negatives=int(minibatch.negative_dsts.numel()))

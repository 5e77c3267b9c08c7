"""What the writer of result files (bench/run/record.py, the session's journal) and their reader
(bench/publish/results.py, result_schema.py) agree on: the schema version, the dataset fields
every cell carries, the fields every measured cell's extra_info must hold, and the statuses of a
cell that has no measurement. Plain data below both sides, so neither imports the other.
"""

SCHEMA_VERSION = 1
DATASET_FIELDS = ("name", "num_nodes", "num_edges", "feature_dim", "num_classes")
REQUIRED_EXTRA = ("backend", "stack", "versions", "dataset", "settings", "seeds_per_s", "edges_per_s",
                  "loader_stall", "peak_rss_bytes", "peak_pss_bytes", "val_acc", "test_acc", "startup_s")
UNMEASURED_STATUSES = ("failed", "timeout", "oom", "skipped", "refused", "follower")

"""The result model: a result file (its format: bench/result_format.py) read once by `read()` into a
RunResult holding a CellResult per cell in the suite's order, measured or not, with the derived
scores (speedups, scaling efficiency) computed here and nowhere else.
"""

from __future__ import annotations

import dataclasses
import datetime as dt
import json
from collections import namedtuple
from dataclasses import dataclass, field
from pathlib import Path

from bench.settings import Recorded
from bench.result_format import REQUIRED_EXTRA, SCHEMA_VERSION, Card, ExtraInfo, RankEntry, problems
from bench import paired_ratio, result_format
from bench.publish.fmt import group_by

NOT_RUN = "not run"
NOT_RUN_REASON = "the run ended before this cell"
# Scores older writers stored in extra_info; they are recomputed on read, never trusted.
STORED_SCORES = ("speedup_vs_ws1", "scaling_efficiency")


class ResultsError(ValueError):
    pass


def _record(model, name: str, doc: str) -> type:
    """A frozen record with a field per field of the result_format `model` (None where a file lacks it)."""
    return dataclasses.make_dataclass(name, [(f, object, field(default=None)) for f in model.model_fields],
                                      frozen=True, namespace={"__doc__": doc})


DatasetCard = _record(Card, "DatasetCard", "The statistics of the graph (or graph collection) a cell measured on.")
Stats = _record(result_format.Stats, "Stats", "pytest-benchmark's statistics of the measured epochs (s; a round is an epoch).")
Rank = _record(RankEntry, "Rank", "One rank of a cell: its process tree's peak memory and where its epochs went.")


# The extra_info fields that say which cell it is rather than what it measured: CellResult holds them.
CELL_FIELDS = frozenset({"cell_id", "backend", "stack", "versions", "device", "dataset", "settings", "is_baseline"})
# The measured fields read as typed records rather than as stored (every other one is kept as stored).
METRIC_READERS = {
    "warmup_epoch_s": lambda stored: tuple(stored or ()),
    "ranks": lambda stored: tuple(_fields_of(Rank, r) for r in stored or []),
}


def _get(self, name: str):
    """A recorded number by its extra_info name, declared or not: what a column reads."""
    return getattr(self, name) if name in METRIC_FIELDS else self.other.get(name)


# A measured cell's numbers: one attribute per ExtraInfo field that is not a cell field (None where a
# file predates it), plus `other`, the recorded numbers no declaration names.
Metrics = dataclasses.make_dataclass(
    "Metrics",
    [(name, object, field(default=None)) for name in ExtraInfo.model_fields if name not in CELL_FIELDS]
    + [("other", dict, field(default_factory=dict))],
    frozen=True, namespace={"get": _get, "__doc__": "A measured cell's numbers, by their extra_info names."})
METRIC_FIELDS = frozenset(f.name for f in dataclasses.fields(Metrics)) - {"other"}


@dataclass(frozen=True)
class CellResult:
    """One cell of one run, measured ("ok": stats, metrics) or not (with a reason), and its derived scores."""
    id: str
    status: str
    backend: str | None
    dataset: str | None
    settings: Recorded  # as recorded (bench/settings.py)
    reason: str = ""
    stack: str | None = None
    card: DatasetCard | None = None
    stats: Stats | None = None
    metrics: Metrics | None = None
    versions: dict = field(default_factory=dict)
    device: dict = field(default_factory=dict)
    file: Path | None = None          # the result file it was read from
    machine: Machine | None = None    # the machine of that run (its ceilings hold the stages against it)
    # derived on read (see score(), stages.equal_work() and stages.fewer_seeds()):
    work_flag: str | None = None      # it did different work than a cell it is compared with
    seeds_flag: str | None = None     # it trained fewer seeds per epoch than a cell it is compared with
    is_baseline: bool = False
    reference_id: str | None = None   # the cell its `speedup` is against
    speedup: float | None = None      # reference's median epoch / this cell's (from their pair, where paired)
    speedup_ci: tuple | None = None   # its 95 % interval, where the two cells took turns (paired_speedups)
    speedup_unpaired: bool = False    # in a run that paired cells, this one's speedup is not from a pair
    speedup_vs_ws1: float | None = None   # same configuration at 1 rank / this cell
    scaling_efficiency: float | None = None   # speedup_vs_ws1 / world size

    @property
    def measured(self) -> bool:
        return self.status == "ok"

    @property
    def median(self) -> float | None:
        return self.stats.median if self.stats else None

    @property
    def is_reference(self) -> bool:
        return self.reference_id == self.id

    @property
    def world_size(self) -> int | None:
        return self.settings.world_size

    @property
    def num_ranks(self) -> int | None:
        return len(self.metrics.ranks) or None if self.metrics else None

    @property
    def rank_pss_bytes(self) -> int | None:
        """The largest per-rank peak PSS (workers included), else the cell's peak PSS."""
        peaks = [r.peak_pss_bytes for r in self.metrics.ranks if r.peak_pss_bytes is not None]
        return max(peaks) if peaks else self.metrics.peak_pss_bytes

    @property
    def series_key(self) -> tuple:
        """What the cells of one scaling series share: everything but the world size."""
        rest = {k: v for k, v in self.settings.items() if k != "world_size"}
        return self.dataset, self.backend, json.dumps(rest, sort_keys=True, default=str)

    @property
    def to_target(self) -> dict | None:
        """Its training to the suite's `target_acc` (bench/run/to_target.py), reached or not, or None."""
        return self.metrics.to_target if self.metrics else None

    @property
    def target_seconds(self) -> float | None:
        """Training seconds to the target (evaluation apart); None where it was not reached or not sought."""
        found = self.to_target
        return found["seconds"] if found and found.get("reached") else None

    @property
    def config_label(self) -> str:
        """The configuration a scaling series shares, named for people: the id without its world size."""
        return id_without_world_size(self.id, self.world_size)


GPU = namedtuple("GPU", "name driver memory", defaults=(None, None))  # one nvidia-smi line, parsed


@dataclass(frozen=True)
class Machine:
    """Where a run happened: pytest-benchmark's machine_info and our machine_info["gnnbench"]."""
    node: str | None = None
    cpu_brand: str | None = None
    processor: str | None = None
    cpu_count: int | None = None      # pytest-benchmark's (py-cpuinfo) count
    cpu_clock: str | None = None      # py-cpuinfo's advertised clock ("2.6000 GHz"): one VM model comes at several
    arch: str | None = None
    system: str = ""
    kernel: str | None = None
    python: str | None = None
    cpu_count_logical: int | None = None
    cpu_count_physical: int | None = None
    memory_total_bytes: int | None = None
    gpu_lines: tuple[str, ...] = ()   # nvidia-smi lines as recorded
    topology: str | None = None       # nvidia-smi topo -m
    gpu_details: dict = field(default_factory=dict)  # clocks, PCIe, MIG, NCCL_*: bench/machine/gpu_facts.py
    container_image: str | None = None
    container_revision: str | None = None
    gnnbench_version: str | None = None
    stacks: dict = field(default_factory=dict)   # stack -> {package: version}
    ceilings: dict = field(default_factory=dict)  # what the machine can do at most (bench.machine.ceilings)
    cluster: dict = field(default_factory=dict)  # the scheduler that started this node's run (bench.run.cluster_env)

    @property
    def cluster_line(self) -> str | None:
        """`slurm job 123 on n1, n2 (node 0 of 2)`, where a scheduler started the run."""
        c = self.cluster
        if not c or not c.get("scheduler"):
            return None
        job = f" job {c['job_id']}" if c.get("job_id") else ""
        nodes = f" on {', '.join(map(str, c['nodes']))}" if c.get("nodes") else ""
        return f"{c['scheduler']}{job}{nodes} (node {c.get('node_rank', '?')} of {c.get('nnodes', '?')})"

    @property
    def cpu_name(self) -> str:
        return self.cpu_brand or self.processor or "?"

    @property
    def gpus(self) -> list[GPU]:
        """The lines of `nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader`."""
        parts = [[p.strip() for p in str(line).rsplit(",", 2)] for line in self.gpu_lines]
        return [GPU(*p) if len(p) == 3 else GPU(str(line)) for p, line in zip(parts, self.gpu_lines)]

    @property
    def key(self) -> tuple:
        """What makes two runs' timings comparable: same host, CPU model and clock, core count, architecture."""
        return self.node, self.cpu_brand, self.cpu_clock, self.cpu_count, self.arch


@dataclass(frozen=True)
class RunResult:
    """One result file: the run's facts and its cells in the suite's order."""
    path: Path
    suite: str | None
    description: str | None
    baseline: str | None
    started_at: str | None
    datetime: str | None              # pytest-benchmark's: when the run finished
    commit: dict                      # pytest-benchmark's commit_info (id, dirty, branch, ...)
    machine: Machine
    cells: tuple[CellResult, ...]
    not_run: tuple[str, ...] = ()     # backends that --stack or --mode left without a cell, and why
    pairs: tuple[dict, ...] = ()      # paired comparisons (bench/run/paired.py), as its cells' entries hold them

    def pair(self, first: str, second: str) -> dict | None:
        """The paired comparison of two cells, either way round, as `second` over `first`."""
        for found in self.pairs:
            if (found["first"], found["second"]) == (first, second):
                return found
            if (found["first"], found["second"]) == (second, first):
                flipped = [1 / x for x in reversed(found["ci95"])] if found.get("ci95") else None
                return {**found, "first": first, "second": second, "ci95": flipped,
                        "ratio": 1 / found["ratio"] if found.get("ratio") else None,
                        "first_waiting_cpu": found.get("second_waiting_cpu"),
                        "second_waiting_cpu": found.get("first_waiting_cpu")}
        return None

    @property
    def measured(self) -> list[CellResult]:
        return [c for c in self.cells if c.measured]

    @property
    def unmeasured(self) -> list[CellResult]:
        """Cells the run tried or declined (failed, timeout, skipped, refused), not those it never reached."""
        return [c for c in self.cells if not c.measured and c.status != NOT_RUN]

    @property
    def finished(self) -> str | None:
        """When the run finished, as recorded (its start where the finish is missing)."""
        return self.datetime or self.started_at

    @property
    def finished_at(self) -> dt.datetime:
        """`finished` as a moment, for ordering runs; unknown dates sort first."""
        try:
            moment = dt.datetime.fromisoformat(str(self.finished))
        except ValueError:
            return dt.datetime.min.replace(tzinfo=dt.timezone.utc)
        return moment if moment.tzinfo else moment.replace(tzinfo=dt.timezone.utc)


def read(path: Path) -> RunResult:
    """Read and check one result file (ResultsError names the file and what is wrong)."""
    return of_document(_load(Path(path)), path)


def of_document(data, path: Path) -> RunResult:
    """Check and read a result file's content (from `path`, or a journal's: bench/run/recover.py)."""
    path = Path(path)
    _check(data, path)
    from bench.publish.stages import equal_work, fewer_seeds  # stages reads this module's model: a cycle at the top

    meta = data.get("gnnbench", {})
    machine = _machine(data.get("machine_info") or {})
    present = [dataclasses.replace(_measured_cell(b, path), machine=machine) for b in data["benchmarks"]]
    present += [_unmeasured_cell(u, path) for u in data.get("unmeasured", [])]
    cells = score(_in_suite_order(meta.get("cells") or [], present), meta.get("baseline"))
    flags, fewer = equal_work(cells), fewer_seeds(cells)
    cells = [dataclasses.replace(c, work_flag=flags.get(c.id), seeds_flag=fewer.get(c.id)) for c in cells]
    return RunResult(
        path=path, suite=meta.get("suite"), description=meta.get("description"),
        baseline=meta.get("baseline"), started_at=meta.get("started_at"), datetime=data.get("datetime"),
        commit=data.get("commit_info") or {}, machine=machine, not_run=tuple(meta.get("backends_not_run") or ()),
        cells=tuple(paired_speedups(cells, _pairs(data["benchmarks"]))), pairs=_pairs(data["benchmarks"]))


def paired_speedups(cells: list[CellResult], pairs: tuple[dict, ...]) -> list[CellResult]:
    """Each cell's speedup taken from its turns beside its reference, where the two were paired with an
    interval over launches (bench/run/paired.py): the reference's epoch over the cell's, as the pair's
    1/ratio, and its interval; else the medians' ratio stays (scored above)."""
    found = {}
    for pair in pairs:
        if pair.get("paired") and pair.get("ratio") and pair.get("ci95") and pair.get("launches"):
            low, high = pair["ci95"]
            found[(pair["first"], pair["second"])] = (1 / pair["ratio"], (1 / high, 1 / low))
            found[(pair["second"], pair["first"])] = (pair["ratio"], (low, high))
    return [dataclasses.replace(c, speedup=found[key][0], speedup_ci=found[key][1])
            if (key := (c.reference_id, c.id)) in found
            else dataclasses.replace(c, speedup_unpaired=bool(found) and c.measured and not c.is_reference)
            for c in cells]


def _pairs(benchmarks: list[dict]) -> tuple[dict, ...]:
    """Each paired comparison once (both its cells' entries hold it; checked with them, ExtraInfo)."""
    return tuple({(pair["axis"], pair["first"], pair["second"]): pair
                  for bench in benchmarks for pair in bench["extra_info"].get("pairs") or []}.values())


def _load(path: Path) -> dict:
    if path.is_dir():
        raise ResultsError(f"{path}: a folder, not a result file; give its result files "
                           f"(e.g. {path}/*.json)")
    try:
        return json.loads(path.read_text())
    except FileNotFoundError:
        raise ResultsError(f"{path}: no such result file") from None
    except (json.JSONDecodeError, UnicodeDecodeError) as exc:
        raise ResultsError(f"{path}: not a JSON result file ({exc})") from None
    except OSError as exc:
        raise ResultsError(f"{path}: cannot read the result file ({exc.strerror or exc})") from None


def _check(data, path: Path) -> None:
    if not isinstance(data, dict) or not isinstance(data.get("benchmarks"), list):
        raise ResultsError(f"{path}: not a pytest-benchmark result (no 'benchmarks' list)")
    meta = data.get("gnnbench")
    version = meta.get("schema_version") if isinstance(meta, dict) else None
    if version is None:
        raise ResultsError(f"{path}: no 'gnnbench.schema_version': not written by gnnbench")
    if not isinstance(version, int) or isinstance(version, bool):
        raise ResultsError(f"{path}: gnnbench.schema_version: {version!r} is not a whole number")
    if version > SCHEMA_VERSION:
        raise ResultsError(f"{path}: schema version {version} is newer than this gnnbench reads "
                           f"({SCHEMA_VERSION}); upgrade gnnbench")
    for i, bench in enumerate(data["benchmarks"]):
        info = bench.get("extra_info") if isinstance(bench, dict) else None
        if not isinstance(info, dict):
            continue  # the schema below names what is wrong
        if missing := [k for k in REQUIRED_EXTRA if k not in info]:
            raise ResultsError(f"{path}: benchmarks[{i}] ({bench.get('name')}): extra_info lacks {', '.join(missing)}")
        if not isinstance(bench.get("stats"), dict) or "median" not in bench["stats"]:
            raise ResultsError(f"{path}: benchmarks[{i}] ({bench.get('name')}): stats lack the median")
    found = problems(path, data) or pair_problems(data, path)  # types and ranges (no NaN, no negative times), then pairs
    if found:
        more = f"\n... and {len(found) - 10} more" if len(found) > 10 else ""
        raise ResultsError("\n".join(found[:10]) + more)


PLACES = {"inside": "inside", "outside": "wholly outside", None: "across an edge of"}  # paired_ratio.band_state's


def pair_problems(data: dict, path: Path) -> list[str]:
    """What is wrong with the pairs of a file whose types are right (bench/run/paired.py PairResult as
    written, its figures agreeing with one another), one line each naming the pair."""
    meta, benchmarks = data["gnnbench"], data["benchmarks"]
    cells = ({b["extra_info"]["cell_id"] for b in benchmarks} | {u["id"] for u in data.get("unmeasured", [])}
             | set(meta.get("cells") or []))
    held = [(f"benchmarks[{i}].extra_info.pairs[{j}]", pair) for i, b in enumerate(benchmarks)
            for j, pair in enumerate(b["extra_info"].get("pairs") or [])]
    held += [(f"gnnbench.pairs[{j}]", pair) for j, pair in enumerate(meta.get("pairs") or [])]
    return [f"{path}: {where} ({pair['first'][:80]} -> {pair['second'][:80]}): {why}" for where, pair in held
            if (why := _pair_problem(pair, cells))]


def _pair_problem(pair: dict, cells: set[str]) -> str | None:
    ci, ratio, settled, within = pair.get("ci95"), pair.get("ratio"), pair.get("settled"), pair.get("within", paired_ratio.TOLERANCE)
    shown = "-".join(f"{x:.3f}" for x in (ci or [])[:3]) or "none"
    state = paired_ratio.band_state(ci, within) if ci and len(ci) == 2 else None
    if settled == "inside" and ci and 1 - within - 1e-12 <= ci[0] <= ci[-1] <= 1 + within + 1e-12:
        state = "inside"  # files written before the band was symmetric in log space: 1-w .. 1+w, a little wider
    # the runner axis's first is a cell's unwatched twin (bench/run/paired.py unwatched_twin)
    unknown = [side for side in ("first", "second") if pair[side] not in cells and not (
        pair["axis"] == "runner" and pair[side].endswith("/runner=off") and pair[side][:-11] in cells)]
    return (f"ci95 holds {len(ci)} value(s); allowed: two, low and high, or none" if ci is not None and len(ci) != 2
            else f"ci95 {shown} is reversed; allowed: low, then high" if ci and ci[0] > ci[1]
            else f"ratio {ratio:.3f} lies outside its 95 % interval {shown}"
            if ci and ratio is not None and not ci[0] * (1 - 1e-9) <= ratio <= ci[1] * (1 + 1e-9)
            else f"settled {settled!r}, but its interval {shown} lies {PLACES[state]} the band ±{within:.0%}"
            if ci and settled not in (None, state)
            else f"settled {settled!r} without an interval; allowed: none" if settled and not ci
            else f"{unknown[0]} {pair[unknown[0]][:80]} is no cell of this file (a pair compares two of its cells)"
            if unknown else None)


def _measured_cell(bench: dict, path: Path) -> CellResult:
    info, stats = bench["extra_info"], bench["stats"]
    data = tuple(stats.get("data") or ())
    return CellResult(
        id=info["cell_id"], status="ok", backend=info["backend"], stack=info["stack"],
        dataset=info["dataset"].get("name"), settings=Recorded(info["settings"]), card=_fields_of(DatasetCard, info["dataset"]),
        stats=_fields_of(Stats, stats | {"data": data, "rounds": stats.get("rounds") or len(data)}),
        metrics=Metrics(**{k: METRIC_READERS.get(k, lambda stored: stored)(info.get(k)) for k in METRIC_FIELDS},
                        other={k: v for k, v in info.items() if k not in CELL_FIELDS | METRIC_FIELDS | set(STORED_SCORES)}),
        versions=info.get("versions") or {}, device=info.get("device") or {}, file=path)


def _fields_of(cls, record: dict):
    """A record whose fields are all optional in the file (None where not recorded)."""
    return cls(**{f.name: record.get(f.name) for f in dataclasses.fields(cls)})


def _unmeasured_cell(record: dict, path: Path) -> CellResult:
    # writers record backend and dataset beside the id; a hand-written record may not
    backend, dataset = backend_and_dataset_from_id(record["id"])
    return CellResult(id=record["id"], status=record["status"], reason=record.get("reason") or "",
                      backend=record.get("backend") or backend, dataset=record.get("dataset") or dataset,
                      settings=Recorded(record.get("settings") or {}), file=path)


def _in_suite_order(order: list[str], present: list[CellResult]) -> list[CellResult]:
    """The cells in the suite's order (listed without a record: not run; unlisted: last), measured records winning."""
    by_id: dict[str, CellResult] = {}
    for cell in present:
        if cell.measured or cell.id not in by_id:
            by_id[cell.id] = cell
    out = [by_id.pop(cell_id) if cell_id in by_id else
           CellResult(cell_id, NOT_RUN, *backend_and_dataset_from_id(cell_id), Recorded(), reason=NOT_RUN_REASON)
           for cell_id in dict.fromkeys(order)]
    return out + list(by_id.values())


def _machine(info: dict) -> Machine:
    ours = info.get("gnnbench") or {}
    gpu = ours.get("gpu") or {}
    return Machine(
        node=info.get("node"), cpu_brand=(info.get("cpu") or {}).get("brand_raw"), processor=info.get("processor"),
        cpu_count=(info.get("cpu") or {}).get("count"), arch=info.get("machine"),
        cpu_clock=(info.get("cpu") or {}).get("hz_advertised_friendly"),
        system=" ".join(str(info[k]) for k in ("system", "machine") if info.get(k)),
        kernel=ours.get("kernel") or info.get("release"), python=info.get("python_version"),
        cpu_count_logical=ours.get("cpu_count_logical"), cpu_count_physical=ours.get("cpu_count_physical"),
        memory_total_bytes=ours.get("memory_total_bytes"), gpu_lines=tuple(gpu.get("gpus") or ()),
        topology=gpu.get("topology"), container_image=ours.get("container_image"),
        gpu_details={k: gpu[k] for k in ("devices", "mig_mode", "cuda_visible_devices", "nccl_env") if gpu.get(k) is not None},
        container_revision=ours.get("container_revision"), gnnbench_version=ours.get("version"),
        stacks=ours.get("stacks") or {}, ceilings=ours.get("ceilings") or info.get("ceilings") or {},
        cluster=ours.get("cluster") if isinstance(ours.get("cluster"), dict) else {})


# --- derived scores: computed here, from the medians, and nowhere else ----------------------

def score(cells: list[CellResult], baseline: str | None) -> list[CellResult]:
    """The cells with their speedups against their dataset's reference (the baseline, else its first) and 1 rank."""
    measured = [c for c in cells if c.measured]
    references = {c.dataset: c for c in reversed(measured)}  # each dataset's first, then the baseline
    references |= {c.dataset: c for c in measured if c.id == baseline}
    single = {key: series[0] for key, series in scaling_series(measured).items() if series[0].world_size == 1}

    def scored(cell: CellResult) -> CellResult:
        reference, one_rank = references[cell.dataset], single.get(cell.series_key)
        speedup, efficiency = scaling_scores(one_rank, cell) if one_rank else (None, None)
        return dataclasses.replace(
            cell, is_baseline=cell.id == baseline, reference_id=reference.id,
            speedup=reference.median / cell.median, speedup_vs_ws1=speedup, scaling_efficiency=efficiency)
    return [scored(c) if c.measured else c for c in cells]


def scaling_scores(one_rank: CellResult, cell: CellResult) -> tuple[float, float]:
    """Speedup of `cell` over 1 rank, and its scaling efficiency (speedup / world size)."""
    speedup = one_rank.median / cell.median
    return speedup, speedup / cell.world_size


def scaling_series(cells) -> dict[tuple, list[CellResult]]:
    """Measured cells grouped by configuration (all but the world size), each by world size."""
    groups = group_by((c for c in cells if c.measured and c.world_size is not None), lambda c: c.series_key)
    return {key: sorted(group, key=lambda c: c.world_size) for key, group in groups.items()}


def backend_and_dataset_from_id(cell_id: str) -> tuple[str | None, str | None]:
    """Backend and dataset of a cell known by its id alone (`backend/dataset/setting=value/...`)."""
    return tuple((cell_id.split("/") + [None, None])[:2])


def id_without_world_size(cell_id: str, world_size: int | None) -> str:
    """A cell id with its `ws=N` part left out: how a scaling series is labelled."""
    return "/".join(part for part in cell_id.split("/") if part != f"ws={world_size}")

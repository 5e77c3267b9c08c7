"""Turns result files into table rows (one concern: the numbers each table shows), and renders
them as Markdown. The HTML site (bench/publish/site.py) renders the same rows with the same macros."""

from __future__ import annotations

import json
import re
from pathlib import Path

import jinja2
from markupsafe import Markup, escape

from bench.publish.results import ResultFile

TEMPLATES = Path(__file__).parent / "templates"


def rows(result: ResultFile) -> list[dict]:
    """One row per cell, in the suite's order: measured cells with their numbers, the others
    with their status and reason."""
    measured = {b["extra_info"]["cell_id"]: b for b in result.benchmarks}
    unmeasured = {u["id"]: u for u in result.unmeasured}
    order = result.meta.get("cells") or [*measured, *unmeasured]
    # speedup against the suite's baseline cell; for a dataset the baseline does not run on,
    # against that dataset's first measured cell (epoch times of different graphs don't compare)
    references = {}
    for bench in measured.values():
        references.setdefault(bench["extra_info"]["dataset"]["name"], bench)
    baseline = measured.get(result.meta.get("baseline"))
    if baseline is not None:
        references[baseline["extra_info"]["dataset"]["name"]] = baseline
    out = []
    for cell_id in order:
        if cell_id in measured:
            bench = measured[cell_id]
            stats, info = bench["stats"], bench["extra_info"]
            out.append({
                "id": cell_id, "status": "ok", "reason": "",
                "median_s": stats["median"], "iqr_s": stats["iqr"], "rounds": stats["rounds"],
                "q1_s": stats.get("q1"), "q3_s": stats.get("q3"),
                "speedup": references[info["dataset"]["name"]]["stats"]["median"] / stats["median"],
                "reference": references[info["dataset"]["name"]]["extra_info"]["cell_id"] == cell_id,
                "seeds_per_s": info["seeds_per_s"], "edges_per_s": info["edges_per_s"],
                "loader_stall": info["loader_stall"], "peak_pss_bytes": info["peak_pss_bytes"],
                "peak_rss_bytes": info["peak_rss_bytes"], "val_acc": info["val_acc"],
                "test_acc": info["test_acc"], "startup_s": info["startup_s"],
                "is_baseline": cell_id == result.meta.get("baseline"),
                "reference_id": references[info["dataset"]["name"]]["extra_info"]["cell_id"],
                "dataset": info["dataset"]["name"], "backend": info["backend"], "settings": info["settings"],
                "rank_pss_bytes": max_rank_pss(info), "total_pss_bytes": info.get("total_pss_bytes"),
                "num_ranks": len(info.get("ranks") or []) or None,
                "gpu_peak_bytes": info.get(GPU_MEMORY_FIELD),
                "speedup_vs_ws1": info.get("speedup_vs_ws1"), "efficiency": info.get("scaling_efficiency"),
            })
        elif cell_id in unmeasured:
            u = unmeasured[cell_id]
            out.append({"id": cell_id, "status": u["status"], "reason": u.get("reason", ""),
                        "dataset": u.get("dataset"), "backend": u.get("backend"), "settings": u.get("settings") or {}})
        else:
            backend, dataset = (cell_id.split("/") + [None, None])[:2]  # ids are backend/dataset/...
            out.append({"id": cell_id, "status": "not run", "reason": "the run ended before this cell",
                        "dataset": dataset, "backend": backend, "settings": {}})
    return out


# Peak device memory of a cell; the results contract has no such field yet, so the column
# only appears once cells carry it.
GPU_MEMORY_FIELD = "peak_gpu_bytes"


def max_rank_pss(info: dict) -> int | None:
    """The largest per-rank peak PSS (one rank's whole process tree, DataLoader workers included)."""
    peaks = [r.get("peak_pss_bytes") for r in info.get("ranks") or []]
    peaks = [p for p in peaks if p is not None]
    return max(peaks) if peaks else info.get("peak_pss_bytes")


def dataset_tables(result: ResultFile) -> list[dict]:
    """The rows of one run split per dataset (epoch times of different graphs don't compare),
    with the settings that vary inside each table as columns and the others stated once.
    Settings are read generically, so a new axis shows up without template changes."""
    by_dataset: dict[str, list[dict]] = {}
    for row in rows(result):
        by_dataset.setdefault(row["dataset"] or "(unknown dataset)", []).append(row)
    cards = {c["name"]: c for c in dataset_cards(result)}
    tables = []
    for name, table_rows in by_dataset.items():
        keys = list(dict.fromkeys(k for r in table_rows for k in r["settings"]))
        values = {k: {_key(r["settings"].get(k)) for r in table_rows if r["settings"]} for k in keys}
        varying = [k for k in keys if len(values[k]) > 1]
        common = {k: next(r["settings"][k] for r in table_rows if k in r["settings"])
                  for k in keys if k not in varying}
        tables.append({"dataset": name, "card": cards.get(name), "rows": table_rows, "varying": varying,
                       "common": common, "has_gpu_memory": any(r.get("gpu_peak_bytes") for r in table_rows),
                       "reference": next((r["reference_id"] for r in table_rows if r["status"] == "ok"), None)})
    return tables


def failures(result: ResultFile) -> list[dict]:
    """The cells that produced no number, with the full error text."""
    return [r for r in rows(result) if r["status"] != "ok"]


def _key(value) -> str:
    return json.dumps(value, sort_keys=True)


def setting_text(value) -> str:
    """A setting as a short label: lists as 10,5, None as a dash."""
    if value is None:
        return "–"
    if isinstance(value, (list, tuple)):
        return ",".join(setting_text(v) for v in value)
    return str(value)


def scaling_rows(result: ResultFile) -> list[dict]:
    """For configurations measured at several world sizes: one row per world size with epoch
    time, speedup and efficiency against 1 rank, and where each epoch went."""
    groups: dict[tuple, list[dict]] = {}
    for bench in result.benchmarks:
        info = bench["extra_info"]
        world = info["settings"]["world_size"]
        key = (info["dataset"]["name"], info["cell_id"].replace(f"/ws={world}", ""))
        groups.setdefault(key, []).append(bench)
    out = []
    for (dataset, config), benches in groups.items():
        if len(benches) < 2:
            continue
        for bench in sorted(benches, key=lambda b: b["extra_info"]["settings"]["world_size"]):
            info = bench["extra_info"]
            ranks = info.get("ranks") or []
            out.append({"dataset": dataset, "config": config, "world_size": info["settings"]["world_size"],
                        "median_s": bench["stats"]["median"], "speedup": info.get("speedup_vs_ws1"),
                        "efficiency": info.get("scaling_efficiency"), "loader_stall": info["loader_stall"],
                        "compute_s": info.get("compute_s"), "comm_s": info.get("comm_s"),
                        "total_pss_bytes": info.get("total_pss_bytes"),
                        "rank_pss_bytes": max((r["peak_pss_bytes"] or 0 for r in ranks), default=None)})
    return out


def partitions(result: ResultFile) -> list[dict]:
    """The partitioning behind each partitioned cell (pyg-dist)."""
    return [{"id": b["extra_info"]["cell_id"], **b["extra_info"]["partition"]}
            for b in result.benchmarks if b["extra_info"].get("partition")]


def dataset_cards(result: ResultFile) -> list[dict]:
    """The statistics of each dataset the run measured on, once each."""
    cards = {}
    for bench in result.benchmarks:
        card = bench["extra_info"]["dataset"]
        cards.setdefault(card["name"], card)
    return list(cards.values())


def run_info(result: ResultFile) -> dict:
    """Where and when a run happened, from pytest-benchmark's machine_info and commit_info and
    our own machine_info["gnnbench"]: what the index, the environment page and the README show."""
    machine = result.data.get("machine_info") or {}
    ours = machine.get("gnnbench") or {}
    gpu = ours.get("gpu") or {}
    counts: dict[str, int] = {"ok": len(result.benchmarks)}
    for u in result.unmeasured:
        counts[u.get("status", "?")] = counts.get(u.get("status", "?"), 0) + 1
    return {
        "file": result.path.name, "folder": result.path.parent.name, "path": str(result.path),
        "suite": result.meta.get("suite", "?"), "description": result.meta.get("description"),
        "baseline": result.meta.get("baseline"),
        "datetime": result.data.get("datetime") or result.meta.get("started_at"),
        "commit": result.data.get("commit_info") or {},
        "cpu": (machine.get("cpu") or {}).get("brand_raw") or machine.get("processor") or "?",
        "cpu_count_logical": ours.get("cpu_count_logical"), "cpu_count_physical": ours.get("cpu_count_physical"),
        "memory_total_bytes": ours.get("memory_total_bytes"), "node": machine.get("node"),
        "system": " ".join(str(machine[k]) for k in ("system", "machine") if machine.get(k)),
        "kernel": ours.get("kernel") or machine.get("release"), "python": machine.get("python_version"),
        "gnnbench_version": ours.get("version"),
        "gpus": [gpu_fields(line) for line in gpu.get("gpus") or []], "topology": gpu.get("topology"),
        "container_image": ours.get("container_image"), "container_revision": ours.get("container_revision"),
        "stacks": ours.get("stacks") or {},
        "stack_packages": list(dict.fromkeys(p for v in (ours.get("stacks") or {}).values() for p in v)),
        "cell_devices": cell_devices(result), "counts": counts,
    }


def gpu_fields(line: str) -> dict:
    """One line of `nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader`."""
    parts = [p.strip() for p in str(line).rsplit(",", 2)]
    if len(parts) != 3:
        return {"name": str(line), "driver": None, "memory": None}
    return dict(zip(("name", "driver", "memory"), parts))


def cell_devices(result: ResultFile) -> list[dict]:
    """What each stack's cells saw of the device (CUDA build, GPUs, threads), once per stack."""
    seen: dict[str, dict] = {}
    for bench in result.benchmarks:
        info = bench["extra_info"]
        seen.setdefault(info["stack"], {"stack": info["stack"], "device": info.get("device") or {},
                                        "versions": info.get("versions") or {}})
    return list(seen.values())


def machine_label(info: dict) -> str:
    """A one-line machine description: CPU, cores, memory, GPUs."""
    parts = [info["cpu"]]
    if info["cpu_count_logical"]:
        parts.append(f"{info['cpu_count_logical']} logical cores")
    if info["memory_total_bytes"]:
        parts.append(f"{info['memory_total_bytes'] / 2**30:.0f} GiB")
    gpus = [g["name"] for g in info["gpus"]]
    parts.append(f"{len(gpus)}× {gpus[0]}" if gpus and len(set(gpus)) == 1 else
                 ("GPUs: " + "; ".join(gpus) if gpus else "no GPU"))
    return ", ".join(parts)


def _md(text) -> str:
    """Make any text safe inside a Markdown table cell (and inert as HTML)."""
    text = " ".join(str(text).split())
    return (text.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")
            .replace("|", "\\|"))


def _num(value, fmt: str = "{:.3g}") -> str:
    return "–" if value is None else fmt.format(value)


def _mib(value) -> str:
    return _num(value / 2**20 if value else None, "{:,.0f}")


def _pct(value) -> str:
    return _num(None if value is None else 100 * value, "{:.1f} %")


def _breakable(text) -> Markup:
    """A name that may wrap after each "/" or "_" in a narrow column header (escaped first)."""
    return Markup(re.sub(r"([/_])", r"\1<wbr>", str(escape(str(text)))))


def environment(markup: str = "md") -> jinja2.Environment:
    """The Jinja environment of one output format. HTML autoescapes everything (templates and
    the shared macros alike); Markdown escapes result text through the `md` filter. The shared
    macros write result text through `text`, which is right for each."""
    html = markup == "html"
    env = jinja2.Environment(loader=jinja2.FileSystemLoader(TEMPLATES), undefined=jinja2.StrictUndefined,
                             autoescape=html, trim_blocks=True, lstrip_blocks=True, keep_trailing_newline=True)
    env.filters.update(breakable=_breakable if html else _md, md=_md, num=_num, mib=_mib, pct=_pct, setting=setting_text, machine=machine_label,
                       text=(lambda t: "" if t is None else str(t)) if html else _md)
    return env


def run_view(result: ResultFile) -> dict:
    return {"file": result.path.name, "meta": result.meta, "machine": result.data.get("machine_info", {}),
            "datetime": result.data.get("datetime"), "commit": result.data.get("commit_info", {}),
            "rows": rows(result), "datasets": dataset_cards(result), "scaling": scaling_rows(result),
            "partitions": partitions(result), "info": run_info(result)}


def render_markdown(results: list[ResultFile], command: str | None = None) -> str:
    runs = [run_view(r) for r in results]
    return environment("md").get_template("report.md.j2").render(runs=runs, command=command)

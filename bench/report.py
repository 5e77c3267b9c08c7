"""Turns result files into tables: one Markdown table per suite run, rendered by Jinja."""

from __future__ import annotations

from pathlib import Path

import jinja2

from bench.results import ResultFile

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
                "speedup": references[info["dataset"]["name"]]["stats"]["median"] / stats["median"],
                "reference": references[info["dataset"]["name"]]["extra_info"]["cell_id"] == cell_id,
                "seeds_per_s": info["seeds_per_s"], "edges_per_s": info["edges_per_s"],
                "loader_stall": info["loader_stall"], "peak_pss_bytes": info["peak_pss_bytes"],
                "peak_rss_bytes": info["peak_rss_bytes"], "val_acc": info["val_acc"],
                "test_acc": info["test_acc"], "startup_s": info["startup_s"],
                "is_baseline": cell_id == result.meta.get("baseline"),
            })
        elif cell_id in unmeasured:
            u = unmeasured[cell_id]
            out.append({"id": cell_id, "status": u["status"], "reason": u.get("reason", "")})
        else:
            out.append({"id": cell_id, "status": "not run", "reason": "the run ended before this cell"})
    return out


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


def _md(text) -> str:
    """Make any text safe inside a Markdown table cell (and inert as HTML)."""
    text = " ".join(str(text).split())
    return (text.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")
            .replace("|", "\\|"))


def _num(value, fmt: str = "{:.3g}") -> str:
    return "–" if value is None else fmt.format(value)


def environment() -> jinja2.Environment:
    env = jinja2.Environment(loader=jinja2.FileSystemLoader(TEMPLATES), undefined=jinja2.StrictUndefined,
                             trim_blocks=True, lstrip_blocks=True, keep_trailing_newline=True)
    env.filters.update(md=_md, num=_num, mib=lambda b: _num(b / 2**20 if b else None, "{:,.0f}"),
                       pct=lambda x: _num(None if x is None else 100 * x, "{:.1f} %"))
    return env


def render_markdown(results: list[ResultFile], command: str | None = None) -> str:
    runs = [{"file": r.path.name, "meta": r.meta, "machine": r.data.get("machine_info", {}),
             "datetime": r.data.get("datetime"), "commit": r.data.get("commit_info", {}),
             "rows": rows(r), "datasets": dataset_cards(r), "scaling": scaling_rows(r),
             "partitions": partitions(r)} for r in results]
    return environment().get_template("report.md.j2").render(runs=runs, command=command)

"""Arranges a run's cells into the tables the pages show, and renders them as Markdown; the HTML
site (bench/publish/site.py) renders the same tables with the same macros, columns and formats."""

from __future__ import annotations

import json
import re
from collections import Counter
from pathlib import Path

import jinja2
from markupsafe import Markup, escape

from bench import paired_ratio
from bench.publish import columns, diagnosis, fmt, stages, torch_share
from bench.publish.results import CellResult, DatasetCard, RunResult, scaling_series
from bench.stacks.external import DESCRIPTION_KEYS

TEMPLATES = Path(__file__).parent / "templates"


def dataset_tables(run: RunResult) -> list[dict]:
    """A table per dataset of one run (epoch times of different graphs don't compare), the settings that
    vary in it as columns and the others stated once."""
    cards = {c.name: c for c in dataset_cards(run)}
    tables = []
    for name, cells in fmt.group_by(run.cells, lambda c: c.dataset or "(unknown dataset)").items():
        keys = list(dict.fromkeys(k for c in cells for k in c.settings))
        values = {k: {json.dumps(c.settings.get(k), sort_keys=True) for c in cells if c.settings} for k in keys}
        varying = [k for k in keys if len(values[k]) > 1]
        common = {k: next(c.settings[k] for c in cells if k in c.settings) for k in keys if k not in varying}
        table = {"dataset": name, "card": cards.get(name), "rows": cells, "varying": varying, "common": common,
                 "reference": next((c.reference_id for c in cells if c.measured), None)}
        table["columns"] = columns.html_columns(table)
        tables.append(table)
    return tables


def scaling_rows(run: RunResult) -> list[CellResult]:
    """For configurations measured at several world sizes: their cells, one per world size."""
    return [cell for series in scaling_series(run.cells).values() if len(series) > 1 for cell in series]


def partitions(run: RunResult) -> list[dict]:
    """The partitioning behind each partitioned cell (pyg-dist)."""
    return [{"id": c.id, **c.metrics.partition} for c in run.measured if c.metrics.partition]


def first_each(cells, key) -> list:
    """The first of the cells for each `key` (in the order the keys first appear)."""
    return [group[0] for group in fmt.group_by(cells, key).values()]


def dataset_cards(run: RunResult) -> list[DatasetCard]:
    """The statistics of each dataset the run measured on, once each."""
    return [c.card for c in first_each(run.measured, lambda c: c.card.name)]


def run_info(run: RunResult) -> dict:
    """Where and when a run happened, and how its cells ended (index, environment, history, README)."""
    return {
        "file": run.path.name, "folder": run.path.parent.name, "description": run.description,
        "baseline": run.baseline, "datetime": run.finished, "commit": run.commit, "machine": run.machine,
        "stack_packages": list(dict.fromkeys(p for v in run.machine.stacks.values() for p in packages(v))),
        # what each stack's cells saw of the device (CUDA build, GPUs, threads): one cell per stack
        "cell_devices": first_each(run.measured, lambda c: c.stack),
        "counts": {"ok": len(run.measured), **Counter(c.status for c in run.unmeasured)},
    }


def _md(text) -> str:
    """Make any text safe inside a Markdown table cell (and inert as HTML)."""
    text = " ".join(str(text).split())
    return text.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;").replace("|", "\\|")


def _breakable(text) -> Markup:
    """A name that may wrap after each "/" or "_" in a narrow column header (escaped first)."""
    return Markup(re.sub(r"([/_])", r"\1<wbr>", str(escape(str(text)))))


def environment(markup: str = "md") -> jinja2.Environment:
    """The Jinja environment of one format: HTML autoescapes, Markdown escapes result text through `md`."""
    html = markup == "html"
    env = jinja2.Environment(loader=jinja2.FileSystemLoader(TEMPLATES), undefined=jinja2.StrictUndefined,
                             autoescape=html, trim_blocks=True, lstrip_blocks=True, keep_trailing_newline=True)
    env.filters.update(breakable=_breakable if html else _md, md=_md, num=fmt.num, mib=fmt.mib, pct=fmt.pct,
                       seconds=fmt.seconds, ratio=fmt.ratio, byte_rate=fmt.byte_rate, setting=fmt.setting_text,
                       machine=fmt.machine_summary, when=fmt.when,
                       text=(lambda t: "" if t is None else str(t)) if html else _md,
                       packages=packages, pair_ratio=paired_ratio.ratio_text, pair_verdict=paired_ratio.verdict)
    return env


def packages(versions: dict) -> dict:
    """A recorded stack's package versions, without what describes an external stack."""
    return {k: v for k, v in versions.items() if k not in DESCRIPTION_KEYS and v is not None}


def stage_tables(run: RunResult) -> list[dict]:
    """Per dataset, the measured cells that recorded their stages: where each epoch went."""
    by_dataset = fmt.group_by(filter(stages.seconds, run.measured), lambda c: c.dataset)
    return [{"dataset": name, "rows": cells, "workers": any(c.metrics.loader_worker_s for c in cells),
             "flags": [(c.id, c.work_flag) for c in cells if c.work_flag]} for name, cells in by_dataset.items()]


def pair_rows(run: RunResult) -> list[dict]:
    """The paired comparisons (bench/run/paired.py) as rows: labels, ratio with its interval, verdict."""
    return [{**pair, "first_label": paired_ratio.label(pair["first"], pair["second"])[0],
             "ratio_text": paired_ratio.ratio_text(pair), "verdict": paired_ratio.verdict(pair),
             "plan": (f"{pair['launches']} × {(pair.get('rounds') or 0) // pair['launches']}" if pair.get("launches")
                      else f"1 × {pair.get('rounds') or 0}" if pair.get("paired") else "–"),
             "waiting": " / ".join(f"{w:.1%}" for w in (pair.get("second_waiting_cpu"), pair.get("first_waiting_cpu"))
                                   if w is not None) or "–"}
            for pair in run.pairs]


def pairs_by_host(runs: list[RunResult]) -> dict | None:
    """Where a suite's pairs were measured on more than one host (Machine.key: a timing holds for the
    host that made it): each pair's ratio on each host side by side, from that host's newest run that
    measured the pair (a later run of some cells alone, `-k`, leaves the other pairs their reading),
    and whether their intervals disagree (lie apart). None with one host."""
    newest: dict = {}  # host -> {pair -> (the newest run of that host measuring it, its reading there)}
    for run in sorted(runs, key=lambda r: r.finished_at):
        for p in run.pairs:
            newest.setdefault(run.machine.key, {})[(p["axis"], p["first"], p["second"])] = run, p
    if len(newest) < 2:
        return None
    hosts = list(newest.values())
    rows = []
    for axis, first, second in dict.fromkeys(key for by_pair in hosts for key in by_pair):
        found = [by_pair[axis, first, second][1] if (axis, first, second) in by_pair else None for by_pair in hosts]
        apart = [f["ci95"] for f in found if f and f.get("ci95")]
        disagree = any(a[1] < b[0] for a in apart for b in apart)
        rows.append({"axis": axis, "second": second, "first_label": paired_ratio.label(first, second)[0],
                     "ratios": [paired_ratio.ratio_text(f) if f else "–" for f in found],
                     "agree": ("disagree: the intervals lie apart" if disagree else "agree: the intervals overlap")
                     if len(apart) > 1 else "–"})
    latest = [max((run for run, _ in by_pair.values()), key=lambda r: r.finished_at) for by_pair in hosts]
    return {"hosts": [f"{fmt.host_label(r.machine) or '?'}, {fmt.when(r.finished)}" for r in latest], "rows": rows}


def run_view(run: RunResult, chosen: list[str] | None = None) -> dict:
    cards = dataset_cards(run)
    return {"result": run, "file": run.path.name, "rows": run.cells, "datasets": cards,
            "features_only": any(c.features_only_acc is not None for c in cards),
            "columns": columns.markdown_columns(run.cells, chosen),
            "scaling": scaling_rows(run), "partitions": partitions(run),
            "stage_tables": stage_tables(run), "pairs": pair_rows(run), "torch_share": torch_share.split_rows(run),
            "pairs_one_launch": any(p.get("paired") and not p.get("launches") for p in run.pairs), "diagnoses": diagnosis.diagnose(run.cells),
            "to_target": diagnosis.target_lines(run.cells)}


def render_markdown(runs: list[RunResult], command: str | None = None, chosen: list[str] | None = None) -> str:
    """`chosen`: the per-cell table's columns (`--columns`, columns.markdown_columns); default the brief ones."""
    return environment("md").get_template("report.md.j2").render(
        runs=[run_view(r, chosen) for r in runs], command=command,
        scaling_columns=columns.SCALING_COLUMNS,
        stage_columns=[c for c in columns.STAGE_COLUMNS if c.brief or chosen == ["all"]],
        tolerance=stages.EQUAL_WORK_TOLERANCE)

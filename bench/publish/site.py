"""Builds the static result site: index.html, a page per suite, history.html, environment.html, and a
copy of each result file under data/; autoescaped Jinja pages with inline SVG charts (file:// works).
"""

from __future__ import annotations

import re
import shutil
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path

from bench.publish import advisor, charts, diagnosis, history, lifecycle, report, stages, steps, torch_share
from bench.publish.fmt import first_line, group_by, when
from bench.publish.results import RunResult
from bench.inputs import InputError


@dataclass
class SuiteRuns:
    """All given runs of one suite, oldest first; the newest is the one the suite page shows."""
    name: str
    slug: str
    runs: list[RunResult] = field(default_factory=list)

    @property
    def newest(self) -> RunResult:
        return self.runs[-1]

    @property
    def page(self) -> str:
        return f"suite-{self.slug}.html"


# The mark of a folder `report --html` made, or found holding none of its files: its pages are replaced;
# in a folder without the mark, a file the site would write is the user's and is refused.
SITE_MARK = ".gnnbench-site"


def build(results: list[RunResult], out_dir: Path, command: str | None = None) -> list[Path]:
    """Write the site into out_dir (created, or marked: claim_folder). Returns the pages written."""
    out_dir = Path(out_dir)
    suites = group_by_suite(results)
    taken: set[str] = set()  # each result file's name under data/, unique
    data_links = {r.path: f"data/{unique_slug(f'{r.path.parent.name}-{r.path.stem}', taken)}.json" for r in results}
    claim_folder(out_dir, ["index.html", "history.html", "environment.html", *(s.page for s in suites),
                           *data_links.values()])
    (out_dir / "data").mkdir(parents=True, exist_ok=True)  # each result file copied, so its link works offline
    for result in results:
        shutil.copyfile(result.path, out_dir / data_links[result.path])
    # the advisor over each suite's runs only (another suite's cell of the same id may differ in
    # settings it does not name, e.g. batch size)
    advice = {s.name: advisor.advise(s.runs) for s in suites}
    env = report.environment("html")
    env.filters["summary"] = lambda text: first_line(text, 240)  # a failure's one-line summary
    # the docs site, where `make site` built it beside the pages (mkdocs into DIR/docs): linked from each page
    docs_link = "docs/index.html" if (out_dir / "docs" / "index.html").exists() else None
    common = {"command": command, "suites": suites, "generated_from": len(results), "docs_link": docs_link}

    pages = {"index.html": env.get_template("index.html.j2").render(
        **common, page="index",
        suite_rows=[{"suite": s, "info": report.run_info(s.newest), "runs": len(s.runs)} for s in suites],
        runs=[{"suite": s, "info": report.run_info(r), "data_link": data_links[r.path], "newest": r is s.newest}
              for s in suites for r in reversed(s.runs)],
        advice=[(s, advice[s.name]) for s in suites])}
    for suite in suites:
        pages[suite.page] = env.get_template("suite.html.j2").render(
            **common, page=suite.page, suite=suite, advice=advice[suite.name], **suite_sections(suite, data_links))
    pages["history.html"] = env.get_template("history-page.html.j2").render(
        **common, page="history", groups=history_page(steps.analyse(results)), min_runs=steps.MIN_RUNS)
    pages["environment.html"] = env.get_template("environment.html.j2").render(
        **common, page="environment",
        runs=[(s, report.run_info(r)) for s in suites for r in reversed(s.runs)])

    for name, html in pages.items():
        (out_dir / name).write_text(html, encoding="utf-8")
    return [out_dir / name for name in pages]


def group_by_suite(results: list[RunResult]) -> list[SuiteRuns]:
    """Runs grouped by suite name, each suite's runs in date order, suites by name."""
    slugs: set[str] = set()
    suites = [SuiteRuns(name, unique_slug(name, slugs),
                        sorted(history.distinct(runs), key=lambda r: (r.finished_at, r.path.name)))
              for name, runs in group_by(results, lambda r: str(r.suite or "?")).items()]
    return sorted(suites, key=lambda s: s.name)


def suite_sections(suite: SuiteRuns, data_links: dict[Path, str]) -> dict:
    """Everything the suite page shows, one function per section."""
    newest = suite.newest
    tables = report.dataset_tables(newest)
    for i, table in enumerate(tables):
        table["charts"] = charts.dataset_charts(table, key=f"d{i + 1}")
        table["diagnoses"] = diagnosis.diagnose(table["rows"])
        table["to_target"] = diagnosis.target_lines(table["rows"])
        table["flags"] = [(r.id, r.work_flag) for r in table["rows"] if r.work_flag]
    # the failures table lists the same rows the dataset tables show, each linked by its anchor
    failures = [r for table in tables for r in table["rows"] if not r.measured]
    anchors = {r.id: f"failure-{i}" for i, r in enumerate(failures, 1)}
    return {"info": report.run_info(newest), "data_link": data_links[newest.path], "tables": tables,
            "failures": failures, "anchors": anchors, "partitions": report.partitions(newest),
            "history": history_section(suite),
            # each configuration the newest run measured on several releases, with its release chart
            "releases": [(group, charts.release_chart(f"r{i}", group))
                         for i, group in enumerate(history.release_groups(newest, suite.runs[:-1]), 1)],
            "pairs": report.pair_rows(newest), "torch_share": torch_share.split_rows(newest),
            "pairs_one_launch": any(p.get("paired") and not p.get("launches") for p in newest.pairs),
            "result": newest, "by_host": report.pairs_by_host(suite.runs),
            # what the maintainers of each pipeline compared here say (bench/publish/lifecycle.py)
            "lifecycle": lifecycle.lines_for({c.backend for c in newest.measured + newest.unmeasured}),
            "tolerance": stages.EQUAL_WORK_TOLERANCE}


def history_section(suite: SuiteRuns) -> dict | None:
    """For a suite of ≥2 runs: a trend chart per dataset and the newest run's verdicts, regressions first."""
    if len(suite.runs) < 2:
        return None
    position = {str(r.path): i for i, r in enumerate(suite.runs)}
    labels = [f"#{i} · {when(r.finished, seconds=True).removesuffix(' UTC')}" for i, r in enumerate(suite.runs, 1)]
    by_dataset: dict[str, dict[str, list[tuple]]] = {}
    for cell_id, points in history.trend(suite.runs).items():
        # x: the run's position in date order, so runs on the same day stay apart
        measured = [(position[p.path], p.median_s, None) for p in points if p.status == "ok" and p.median_s is not None]
        if measured:
            dataset = next((p.cell.dataset for p in points if p.cell.dataset), "?")
            by_dataset.setdefault(dataset, {})[cell_id] = measured
    trend_charts = [charts.line_chart(f"h{i + 1}", f"{dataset}: median epoch time per run", "run (finished, UTC)",
                                      "median epoch time (s)", series, xticks=(list(range(len(labels))), labels), wide=True)
                    for i, (dataset, series) in enumerate(by_dataset.items())]
    verdicts = history.compare(suite.runs[-2], suite.newest, history=suite.runs[:-2])
    verdicts.sort(key=lambda v: history.VERDICTS.index(v.verdict))
    return {"runs": [report.run_info(r) for r in suite.runs], "charts": trend_charts, "verdicts": verdicts,
            "previous": report.run_info(suite.runs[-2]), "shift": history.run_shift(verdicts),
            "counts": Counter(v.verdict for v in verdicts)}  # in VERDICTS order, as sorted


def history_page(analysed: list[steps.Series]) -> list[dict]:
    """The history page: per suite and machine, each series with its chart, steps and what changed."""
    groups: list[dict] = []
    for i, series in enumerate(analysed, 1):
        if not groups or (groups[-1]["suite"], groups[-1]["machine"]) != (series.key.suite, series.key.machine):
            groups.append({"suite": series.key.suite, "machine": series.key.machine, "series": []})
        chart = None
        if len(series.points) >= steps.MIN_RUNS:  # shorter series are the suite pages' trend charts
            position = {id(p): n for n, p in enumerate(series.points)}
            chart = charts.step_chart(
                f"s{i}", f"{series.key.cell_id}: median epoch time per run",
                [when(p.when).removesuffix(" UTC") for p in series.points],
                [(p.median_s, charts.iqr_error(p.median_s, p.cell and p.cell.stats)) for p in series.points],
                [(s.position, f"{s.ratio:.2f}x") for s in series.steps], series.levels,
                [position[id(p)] for p in series.outliers])
        groups[-1]["series"].append({
            "series": series, "chart": chart, "anchor": f"series-{i}", "noise": steps.noise_words(series),
            "steps": [(steps.step_words(s, series), s.changed, s.slower) for s in series.steps],
            "outliers": [f"{history.duration(p.median_s)} ({steps.run_words(p)})" for p in series.outliers]})
    return groups


def claim_folder(out_dir: Path, files: list[str]) -> None:
    """Make `out_dir` the site's, or refuse: a folder it made or marked is its own; another folder
    is marked only where none of `files` (relative paths) is there yet."""
    if (out_dir / SITE_MARK).is_file():
        return
    if out_dir.is_dir():
        present = [name for name in files if (out_dir / name).exists() or (out_dir / name).is_symlink()]
        if present:
            raise InputError(f"--html {out_dir}: {out_dir / present[0]} is already there and this folder is not a "
                             f"site gnnbench wrote (no {SITE_MARK}); give a new or empty folder, or remove "
                             f"{len(present)} file(s) it would write over ({', '.join(present[:3])}"
                             f"{' ...' if len(present) > 3 else ''})")
    out_dir.mkdir(parents=True, exist_ok=True)
    (out_dir / SITE_MARK).write_text("a result site written by `gnnbench report --html`: its pages are "
                                     "rewritten by the next build\n")


def unique_slug(text: str, taken: set[str]) -> str:
    """A file-name-safe slug (suite names come from result files: anything may be in them)."""
    base = re.sub(r"[^a-z0-9_.]+", "-", text.lower()).strip("-.") or "x"
    slug, n = base, 2
    while slug in taken:
        slug, n = f"{base}-{n}", n + 1
    taken.add(slug)
    return slug


def render_readme(results: list[RunResult], notes: str | None = None) -> str:
    """results/README.md: the runs and the advisor's advice, through the Markdown templates."""
    suites = group_by_suite(results)
    runs = [{"suite": s, "info": report.run_info(r), "path": _relative(r.path),
             "table": _relative(r.path.with_suffix(".md")) if r.path.with_suffix(".md").exists() else None}
            for s in suites for r in reversed(s.runs)]
    return report.environment("md").get_template("readme.md.j2").render(
        runs=runs, advice=[(s, advisor.advise(s.runs)) for s in suites], notes=notes)


def _relative(path: Path) -> str:
    """A result file's path as its folder/name (links in results/README.md are relative to results/)."""
    return f"{path.parent.name}/{path.name}"

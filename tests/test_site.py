"""The static result site: tables against the input numbers, escaping of hostile result text
(HTML and SVG), charts only where an axis has ≥2 values, history and advisor sections, the CLI,
results/README.md in step with the committed results, and every page in a real headless
Chromium from file:// (no console errors, no failed requests, no dialog; each dataset's main
table fits a 1280 px window, no page is wider than a 390 px one, no chart text holds a
placeholder), with screenshots of each page at both widths kept under $GNNBENCH_ARTIFACTS
(default .artifacts/)."""

from __future__ import annotations

import json
import os
import re
from html.parser import HTMLParser
from pathlib import Path

import pytest

from bench import cli
from bench.publish import report, results, site
from bench.result_format import REQUIRED_EXTRA
from tests import synthetic_results as sr
from tests.conftest import committed_results

REPO = Path(__file__).resolve().parents[1]
COMMITTED = committed_results()
CHROMIUM = Path(os.environ.get("GNNBENCH_CHROMIUM", "/usr/bin/chromium"))
LAPTOP, PHONE = 1280, 390  # window widths (CSS px) the pages must fit
CHROMIUM_ARGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
                 "--disable-background-networking", "--disable-component-update", "--disable-sync"]
HOSTILE = "<script>alert(1)</script>"


# --- a crafted suite: two backends at 1 and 2 ranks, GraphBolt in two modes, a failed cell ------

def entry(backend, ws, mode, median, dataset=HOSTILE, workers=0, gpu=None):
    cell_id = f"{backend}/{dataset}/mode={mode}/workers={workers}/ws={ws}"
    info = {k: 0 for k in REQUIRED_EXTRA}
    info.update(cell_id=cell_id, backend=backend, stack="pyg" if backend.startswith("pyg") else "dgl",
                settings={"num_workers": workers, "mode": mode, "world_size": ws, "batch_size": 64},
                dataset={"name": dataset, "source": "synthetic", "num_nodes": 1000, "num_edges": 5000,
                         "feature_dim": 16, "num_classes": 4, "num_train": 600, "num_val": 200, "num_test": 200},
                seeds_per_s=600 / median, edges_per_s=1e5, loader_stall=0.125, val_acc=0.5, test_acc=0.5,
                peak_pss_bytes=100 * 2**20 * ws, peak_rss_bytes=120 * 2**20, total_pss_bytes=100 * 2**20 * ws,
                startup_s=1.0, ranks=[{"rank": r, "peak_pss_bytes": (90 + 10 * r) * 2**20} for r in range(ws)],
                **({"peak_gpu_bytes": gpu} if gpu else {}))
    return {"name": f"test_cell[{cell_id}]", "extra_info": info,
            "stats": {"median": median, "iqr": median / 10, "q1": median * 0.95, "q3": median * 1.05, "rounds": 5}}


def crafted(tmp_path: Path, name: str = "crafted.json", slow: float = 1.0, when: str = "2026-11-20T10:00:00+00:00",
            staged: bool = False) -> Path:
    """`staged`: the cells carry stage timings and work counts, the machine its ceilings."""
    benches = [entry("pyg-neighbor", 1, "cpu-cpu", 2.0), entry("pyg-neighbor", 2, "cpu-cpu", 1.25 * slow),
               entry("dgl-graphbolt", 1, "cpu-cpu", 1.0), entry("dgl-graphbolt", 2, "cpu-cpu", 0.8),
               entry("dgl-graphbolt", 1, "cuda-cuda", 0.5, gpu=3 * 2**30),
               entry("dgl-graphbolt", 2, "cuda-cuda", 0.3, gpu=3 * 2**30)]
    failed_id = f"pyg-neighbor/{HOSTILE}/mode=cuda-cuda/workers=0/ws=1"
    data = {"datetime": when, "commit_info": {"id": "0123456789abcdef", "dirty": False, "branch": "main"},
            "machine_info": {"node": "box", "machine": "x86_64", "cpu": {"brand_raw": "Test CPU", "count": 8},
                             "gnnbench": {"cpu_count_logical": 8, "memory_total_bytes": 64 * 2**30,
                                          "stacks": {"pyg": {"torch": "2.5"}, "dgl": {"dgl": "2.1"}},
                                          "gpu": {"gpus": ["NVIDIA H100, 550.54, 81559 MiB"],
                                                  "topology": f"GPU0 X {HOSTILE}"},
                                          "container_image": "ghcr.io/x/gnnbench:v1-bench",
                                          "container_revision": "abc123"}},
            "benchmarks": benches,
            "gnnbench": {"schema_version": 1, "suite": "crafted", "description": f"hostile {HOSTILE}",
                         "baseline": benches[0]["extra_info"]["cell_id"],
                         "cells": [b["extra_info"]["cell_id"] for b in benches] + [failed_id]},
            "unmeasured": [{"id": failed_id, "status": "failed", "backend": "pyg-neighbor", "dataset": HOSTILE,
                            "settings": {"num_workers": 0, "mode": "cuda-cuda", "world_size": 1, "batch_size": 64},
                            "reason": f"RuntimeError: {HOSTILE}\nsecond line & more"}]}
    if staged:
        for bench in benches:
            bench["extra_info"].update(sr.stage_info(bench["stats"]["median"]))
        data["machine_info"]["gnnbench"]["ceilings"] = sr.CEILINGS
    path = tmp_path / name
    path.write_text(json.dumps(data))
    return path


class Rows(HTMLParser):
    """Text of the table rows that name a cell (data-cell), by cell id: a cell's row in the main
    table, then its row under "more columns"."""

    def __init__(self):
        super().__init__()
        self.rows: dict[str, list[str]] = {}
        self._cell = None

    def handle_starttag(self, tag, attrs):
        attrs = dict(attrs)
        if tag == "tr" and "data-cell" in attrs:
            self._cell = attrs["data-cell"]
            self.rows.setdefault(self._cell, [])
        elif tag == "td" and self._cell is not None:
            self.rows[self._cell].append("")

    def handle_endtag(self, tag):
        if tag == "tr":
            self._cell = None

    def handle_data(self, data):
        if self._cell is not None and self.rows[self._cell]:
            self.rows[self._cell][-1] += data


def table_rows(html: str) -> dict[str, list[str]]:
    parser = Rows()
    parser.feed(html)
    return {cell: [" ".join(c.split()) for c in cols] for cell, cols in parser.rows.items()}


# --- unit tests ------------------------------------------------------------------------------

def test_tables_hold_the_input_numbers(tmp_path):
    path = crafted(tmp_path)
    site.build([results.read(path)], tmp_path / "site")
    rows = table_rows((tmp_path / "site" / "suite-crafted.html").read_text())
    data = json.loads(path.read_text())
    assert set(rows) == set(data["gnnbench"]["cells"])
    baseline = data["benchmarks"][0]["stats"]["median"]
    medians = {b["extra_info"]["cell_id"]: b["stats"]["median"] for b in data["benchmarks"]}
    for bench in data["benchmarks"]:
        info, median = bench["extra_info"], bench["stats"]["median"]
        text = " | ".join(rows[info["cell_id"]])
        ws = info["settings"]["world_size"]
        one_rank = medians[info["cell_id"].replace(f"/ws={ws}", "/ws=1")]
        assert f"{median:.3f} s ({median / 10:.3f})" in text
        assert f"{baseline / median:.2f}×" in text                               # speedup vs the baseline
        assert f"{one_rank / median / ws * 100:.1f} %" in text                   # scaling efficiency
        assert f"{(90 + 10 * (info['settings']['world_size'] - 1)):,}" in text   # largest rank's PSS, MiB
        assert f"{info['total_pss_bytes'] / 2**20:,.0f}" in text
        assert f"{600 / median:,.0f}" in text                                  # seeds/s
        assert "12.5 %" in text                                                 # loader stall
    assert "3,072" in " ".join(rows[data["benchmarks"][4]["extra_info"]["cell_id"]])  # GPU memory, MiB
    failed = " ".join(rows[data["unmeasured"][0]["id"]])
    assert "failed" in failed and f"RuntimeError: {HOSTILE}" in failed


def test_result_text_is_escaped_in_html_and_svg(tmp_path):
    site.build([results.read(crafted(tmp_path))], tmp_path / "site")
    pages = {p.name: p.read_text() for p in (tmp_path / "site").glob("*.html")}
    for name, html in pages.items():
        assert "<script" not in html.lower(), name
        assert "alert(1)</script>" not in html, name
    suite = pages["suite-crafted.html"]
    assert "RuntimeError: &lt;script&gt;alert(1)&lt;/script&gt;\nsecond line &amp; more" in suite
    svgs = re.findall(r"<svg\b.*?</svg>", suite, flags=re.S)
    assert svgs and all("&lt;script&gt;" in svg for svg in svgs)  # dataset name in every chart title
    assert "GPU0 X &lt;script&gt;" in pages["environment.html"]


def test_markdown_shares_formats_and_escapes(tmp_path):
    md = report.render_markdown([results.read(crafted(tmp_path))])
    assert "<script>" not in md and "| 2.000 (0.200) |" in md


def test_charts_only_where_an_axis_has_two_values(tmp_path):
    table = report.dataset_tables(results.read(crafted(tmp_path)))[0]
    from bench.publish import charts
    titles = [c.title for c in charts.dataset_charts(table, key="t")]
    assert titles == [f"{HOSTILE}: epoch time against world size",
                      f"{HOSTILE}: scaling efficiency against world size",
                      f"{HOSTILE}: total peak PSS, all ranks against world size",
                      f"{HOSTILE}: peak PSS per rank (largest rank) against world size",
                      f"{HOSTILE}: dgl-graphbolt epoch time per mode"]      # one worker count: no chart
    svg = charts.dataset_charts(table, key="t")[0].svg
    assert 'role="img"' in svg and 'aria-labelledby="t-epoch-ws-title"' in svg
    assert '<title id="t-epoch-ws-title">&lt;script&gt;' in svg
    assert "median epoch time (s)" in svg and "world size (ranks)" in svg       # axis labels with units


def test_pages_are_deterministic(tmp_path):
    files = [results.read(crafted(tmp_path))]
    first = {p.name: p.read_text() for p in site.build(files, tmp_path / "a")}
    second = {p.name: p.read_text() for p in site.build(files, tmp_path / "b")}
    assert first == second


def test_history_and_advisor_sections(tmp_path):
    old = crafted(tmp_path, "old.json")
    new = crafted(tmp_path, "new.json", slow=3.0, when="2026-11-21T10:00:00+00:00")
    site.build([results.read(new), results.read(old)], tmp_path / "site")
    html = (tmp_path / "site" / "suite-crafted.html").read_text()
    assert 'id="history"' in html and 'id="advisor"' in html
    slow_id = f"pyg-neighbor/{HOSTILE}/mode=cpu-cpu/workers=0/ws=2"
    history_part = html[html.index('id="history"'):].replace("<wbr>", "")  # ids may break after a / or _
    regression = re.search(r'<tr class="bad">\s*<td class="id"><code>([^<]*)</code></td>.*?status-regression', history_part, re.S)
    assert regression and regression.group(1) == slow_id.replace("<", "&lt;").replace(">", "&gt;")
    assert "3.750 s" in history_part and "1.250 s" in history_part
    assert "median epoch time per run" in history_part
    index = (tmp_path / "site" / "index.html").read_text()
    assert "Advisor" in index and "→" in index


def test_no_setting_is_shown_as_a_placeholder(tmp_path):
    """A setting recorded as empty (`stack: null`) is left out of the settings lines (`Same for every
    cell: ...`) rather than shown as `stack=–`; the committed results record such settings."""
    pages = site.build([results.read(p) for p in COMMITTED], tmp_path / "site")
    shown = {p.name: re.findall(r"[\w.-]+=\u2013", p.read_text()) for p in pages}
    assert {name: found for name, found in shown.items() if found} == {}
    assert any("Same for every cell" in p.read_text() for p in pages)


def test_results_readme_is_generated_from_the_committed_results():
    """results/README.md is what `make results-readme` writes; re-run it after adding results."""
    files = [results.read(p) for p in COMMITTED]
    notes = (REPO / "results" / "NOTES.md").read_text()
    assert (REPO / "results" / "README.md").read_text() == site.render_readme(files, notes)


def test_cli_builds_the_site_and_keeps_markdown(tmp_path, capsys):
    path = crafted(tmp_path)
    out, md = tmp_path / "out", tmp_path / "t.md"
    assert cli.main(["report", str(path), "--html", str(out), "--markdown", str(md)]) == 0
    assert {p.name for p in out.glob("*.html")} == {"index.html", "suite-crafted.html", "history.html", "environment.html"}
    assert (out / "data" / f"{tmp_path.name}-crafted.json".lower()).exists()
    assert "| 2.000 (0.200) |" in md.read_text()
    assert cli.main(["report", str(path)]) == 0 and "| 2.000 (0.200) |" in capsys.readouterr().out
    bad = tmp_path / "bad.json"
    bad.write_text("{}")
    assert cli.main(["report", str(bad), "--html", str(tmp_path / "none")]) == 2
    assert "no 'benchmarks' list" in capsys.readouterr().err and not (tmp_path / "none").exists()


# --- the real browser ------------------------------------------------------------------------

@pytest.fixture(scope="module")
def browser():
    if not CHROMIUM.exists():
        pytest.fail(f"Chromium is missing at {CHROMIUM}: the site test needs it. Install it with `make chromium` "
                    "(apt-get install -y --no-install-recommends chromium), which `make test` runs first.")
    try:
        from playwright.sync_api import sync_playwright
    except ImportError:
        pytest.fail("Playwright for Python is missing: pip install -e '.[test]' (never `playwright install`: "
                    "the test drives /usr/bin/chromium)")
    with sync_playwright() as p:
        b = p.chromium.launch(executable_path=str(CHROMIUM), args=CHROMIUM_ARGS)
        yield b
        b.close()


def test_every_page_in_chromium(tmp_path, browser):
    old = crafted(tmp_path, "crafted-old.json")
    new = crafted(tmp_path, "crafted-new.json", slow=3.0, when="2026-11-21T10:00:00+00:00", staged=True)
    inputs = [results.read(p) for p in [*COMMITTED, old, new]]
    out = tmp_path / "site"
    pages = site.build(inputs, out)
    artifacts = Path(os.environ.get("GNNBENCH_ARTIFACTS", REPO / ".artifacts")) / "site"
    artifacts.mkdir(parents=True, exist_ok=True)
    newest = {s.page: s.newest for s in site.group_by_suite(inputs)}
    assert len(pages) == len(newest) + 3   # and the index, the history and the environment pages

    for path in pages:
        page = browser.new_page(viewport={"width": LAPTOP, "height": 900})
        problems: list[str] = []
        page.on("console", lambda m: m.type in ("error", "warning") and problems.append(f"console {m.type}: {m.text}"))
        page.on("pageerror", lambda e: problems.append(f"page error: {e}"))
        page.on("requestfailed", lambda r: problems.append(f"request failed: {r.url} {r.failure}"))
        page.on("dialog", lambda d: (problems.append(f"dialog: {d.message}"), d.dismiss()))
        response = page.goto(path.resolve().as_uri(), wait_until="load")
        assert response is None or response.ok, path.name
        # the first screen, for a person to look at: a full-page shot of the long history page took
        # over Playwright's 30 s on a busy CI machine, and nothing is asserted on the picture
        page.screenshot(path=str(artifacts / f"{path.stem}.png"))
        assert problems == [], f"{path.name}: {problems}"
        assert page.evaluate("document.scripts.length") == 0, path.name
        # a laptop's window shows each dataset's main table whole (no scrolling inside its box)
        too_wide = page.evaluate("Array.from(document.querySelectorAll('table.main')).map(t => "
                                 "[t.scrollWidth, t.closest('.table-wrap').clientWidth]).filter(([w, box]) => w > box)")
        assert too_wide == [], f"{path.name} at {LAPTOP} px: main tables wider than their box {too_wide}"
        # chart text names values only: no "axis=–", no dash standing for a missing value
        placeholders = page.evaluate("Array.from(document.querySelectorAll('svg.chart text')).map(t => t.textContent)"
                                     ".filter(t => t.includes('=\u2013') || t.trim() === '\u2013')")
        assert placeholders == [], f"{path.name}: chart text with a placeholder {placeholders}"
        # nor any text on the page: a setting recorded as empty is left out, not shown as "stack=–"
        assert "=\u2013" not in page.inner_text("body"), f"{path.name}: a setting shown as a placeholder"

        if path.name in newest:
            run = newest[path.name]
            tables = report.dataset_tables(run)
            assert page.locator("table.main").count() == len(tables), path.name
            shown: dict[str, str] = {}  # a cell's rows: the main table's and the one under "more columns"
            for cell_id, text in page.evaluate(
                    "Array.from(document.querySelectorAll('tr[data-cell]')).map(tr => [tr.dataset.cell, tr.textContent])"):
                shown[cell_id] = shown.get(cell_id, "") + " " + " ".join(text.split())
            raw = json.loads(run.path.read_text())  # the page against its input, not against the model
            expected = raw["gnnbench"].get("cells") or [b["extra_info"]["cell_id"] for b in raw["benchmarks"]]
            assert set(shown) == set(expected), path.name
            for bench in raw["benchmarks"]:
                assert f"{bench['stats']['median']:.3f} s" in shown[bench["extra_info"]["cell_id"]]
            for u in raw.get("unmeasured", []):
                assert u["status"] in shown[u["id"]]
            for t in tables:  # every column's value is on the page, folded or not
                for r in t["rows"]:
                    for c in t["columns"] if r.measured else ():
                        assert c.html_text(r) in shown[r.id], (path.name, r.id, c.html_title)
            charts = page.evaluate("Array.from(document.querySelectorAll('svg.chart')).map(s => "
                                   "[s.getAttribute('aria-labelledby'), s.querySelector('title').textContent])")
            if any(len({str(r.settings.get(axis)) for r in t['rows'] if r.measured}) > 1
                   for t in tables for axis in ("world_size", "num_workers")):
                assert charts, f"{path.name}: no chart"
            assert all(label and title for label, title in charts)

        # a phone's window: the page itself never scrolls sideways (wide tables scroll in their box)
        page.set_viewport_size({"width": PHONE, "height": 800})
        for opened in (False, True):  # then with every toggle open ("more columns", the advisor's evidence)
            if opened:
                page.evaluate("document.querySelectorAll('details').forEach(d => d.open = true)")
            width = page.evaluate("document.documentElement.scrollWidth")
            assert width <= PHONE, f"{path.name} is {width} px wide in a {PHONE} px window (toggles open: {opened})"
        page.screenshot(path=str(artifacts / f"{path.stem}-{PHONE}px.png"))  # the first screen, as above

    page = browser.new_page()
    dialogs: list[str] = []
    page.on("dialog", lambda d: (dialogs.append(d.message), d.dismiss()))
    page.goto((out / "suite-crafted.html").resolve().as_uri())
    page.wait_for_timeout(300)  # time for a script, were there one, to raise its alert
    assert dialogs == []
    body = page.inner_text("body")
    assert f"RuntimeError: {HOSTILE}" in body and f"Dataset {HOSTILE}" in body
    assert page.evaluate("document.querySelectorAll('svg.chart').length") >= 5
    assert page.locator("tr.bad .status-regression").count() >= 1  # the history's regression, highlighted
    # the newest run records its stages: one stacked bar per measured cell, a legend of the stages,
    # the binding stage in the table, and why 2 PyG ranks are slower than 1
    bars = page.locator(f"svg.chart:has(title:text-is('{HOSTILE}: where each epoch goes'))")
    assert bars.count() == 1
    legend = bars.evaluate("svg => svg.textContent")
    assert all(stage in legend for stage in ("sample", "fetch", "forward/backward"))
    assert "forward/backward 40 %" in body  # the binding stage of every crafted cell
    why = page.locator("ul.diagnosis li").all_inner_texts()
    assert [line for line in why if line.startswith(f"pyg-neighbor/{HOSTILE}/mode=cpu-cpu/workers=0/ws=2 is 1.88")]
    page.goto((out / "environment.html").resolve().as_uri())
    ceilings = page.locator("table.ceilings").all_inner_texts()  # one a run that measured them, suite by suite
    assert any("random-row gather, 64-byte rows" in table and "2 GB/s" in table for table in ceilings), ceilings

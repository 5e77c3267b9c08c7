"""The Markdown report is safe to render: a result file whose text fields carry HTML/JS
payloads, rendered by `gnnbench report --markdown`, turned into HTML by a CommonMark renderer
that passes raw HTML through (as a README viewer may), runs none of them in Chromium."""

from __future__ import annotations

import json

import pytest

from bench import cli
from tests.test_site import browser, crafted  # noqa: F401 - the fixture: Chromium as the site test launches it

def payloads(tag: str) -> str:
    """Markup that sets window.pwned to `tag` if it ever runs, in a code span or out of one."""
    return (f"`<img src=x onerror=\"window.pwned='{tag}'\">` <script>window.pwned='{tag}'</script>"
            f" <svg onload=\"window.pwned='{tag}'\"></svg>")


def poison(data: dict, field: str) -> None:
    evil = payloads(field)
    meta, machine = data["gnnbench"], data["machine_info"]["gnnbench"]
    if field == "suite":
        meta["suite"] = evil
    elif field == "description":
        meta["description"] = evil
    elif field == "reason":
        data["unmeasured"][0]["reason"] = evil
    elif field == "cell-id":
        old = data["benchmarks"][1]["extra_info"]["cell_id"]
        new = f"pyg-neighbor/{evil}/mode=cpu-cpu/workers=0/ws=2"
        data["benchmarks"][1]["extra_info"]["cell_id"] = new
        meta["cells"] = [new if c == old else c for c in meta["cells"]]
    elif field == "stack-name":
        machine["stacks"][evil] = {"torch": "2.5"}
    elif field == "package-name":
        machine["stacks"]["pyg"][evil] = "1.0"
    elif field == "package-version":
        machine["stacks"]["pyg"]["torch"] = evil
    elif field == "container-image":
        machine["container_image"] = evil


@pytest.mark.parametrize("field", [
    "suite", "description", "reason", "cell-id",
    "stack-name", "package-name",
    "package-version", "container-image",
])
def test_no_payload_runs_in_the_rendered_markdown(tmp_path, browser, field):  # noqa: F811
    from markdown_it import MarkdownIt

    path = crafted(tmp_path)
    data = json.loads(path.read_text())
    poison(data, field)
    path.write_text(json.dumps(data))
    markdown = tmp_path / "report.md"
    assert cli.main(["report", str(path), "--markdown", str(markdown)]) == 0
    html = MarkdownIt("commonmark", {"html": True}).enable("table").render(markdown.read_text())
    page = browser.new_page()
    try:
        page.set_content(f"<!doctype html><html><body>{html}</body></html>")
        page.wait_for_timeout(300)  # an image's onerror fires after the load
        assert page.evaluate("window.pwned") is None, f"the {field} payload ran"
        assert page.evaluate("document.querySelectorAll('script, svg, img').length") == 0, html
        assert "window.pwned" in page.inner_text("body")  # shown as text instead
    finally:
        page.close()

"""`gnnbench report`: result files as Markdown tables, a static HTML site, or the results README."""

from __future__ import annotations

from pathlib import Path

from bench.commands.history import refuse_named_twice
from bench.inputs import InputError, folder, output_file
from bench.publish import columns, results, site
from bench.publish.report import render_markdown
from bench.run import recover


def add_parser(sub, parents) -> None:
    report = sub.add_parser("report", parents=parents, help="render result files as Markdown tables and/or a static HTML site")
    report.add_argument("files", nargs="+", type=Path)
    report.add_argument("--markdown", type=Path, metavar="FILE",
                        help="write the Markdown tables here (default: stdout, unless --html or --readme is given)")
    report.add_argument("--html", type=Path, metavar="DIR",
                        help="build the static site here: index.html, a page per suite, environment.html")
    report.add_argument("--readme", type=Path, metavar="FILE",
                        help="write the Markdown index of the results here (what results/README.md is)")
    report.add_argument("--command", dest="produced_by", metavar="TEXT", help="the command that produced the results, shown under the table")
    add_columns(report)
    report.add_argument("--force", action="store_true",
                        help="write --markdown/--readme even over one of the input files or another result file")


def add_columns(parser) -> None:
    """`--columns`: the Markdown table's columns, chosen at display time (bench/publish/columns.py)."""
    parser.add_argument("--columns", type=columns.column_choice, metavar="all|NAME,...",
                        help="the Markdown table's columns: all, or names (e.g. epoch-s-median-iqr,peak-rss-mib); "
                             "default: cell, status, epoch time, speedup, throughput, loader stall, binding stage, "
                             "memory, validation accuracy or MRR, time to target")


def run(args) -> int:
    return report_files(args.files, args.markdown, command=args.produced_by, html=args.html,
                        readme=args.readme, force=args.force, chosen=args.columns)


def report_files(files: list[Path], markdown: Path | None, command: str | None = None,
               html: Path | None = None, readme: Path | None = None, force: bool = False,
               chosen: list[str] | None = None) -> int:
    refuse_named_twice([("", f) for f in files])
    seen = {f.resolve() for f in files}
    for option, path in (("--markdown", markdown), ("--readme", readme)):
        if path:
            output_file(f"{option} {path}", path)
            # never a table over an input, or over a file that holds results (JSON, a journal)
            if not force and path.resolve() in seen:
                raise InputError(f"{option} {path}: that is one of the result files being read; give another file "
                                 "(or --force to replace it)")
            if not force and path.exists() and (path.suffix == ".json" or recover.is_journal(path)):
                raise InputError(f"{option} {path}: a result file is already there; give another file (or --force "
                                 "to replace it)")
    if html:
        folder(f"--html {html}", html, writable=True)
    # every file is checked before anything is written; a run's journal reads as `gnnbench recover` writes it
    read = [results.of_document(recover.document(f), f) if recover.is_journal(f) else results.read(f) for f in files]
    if html:
        pages = site.build(read, html, command=command)
        print(f"site: {len(pages)} pages in {html} (open {html / 'index.html'})")
    if readme:
        notes = readme.parent / "NOTES.md"  # hand-written notes kept beside the README, included verbatim
        readme.write_text(site.render_readme(read, notes.read_text() if notes.exists() else None))
        print(f"readme: {readme}")
    if markdown:
        markdown.write_text(render_markdown(read, command=command, chosen=chosen))
    elif not (html or readme):
        print(render_markdown(read, command=command, chosen=chosen))
    return 0


"""`gnnbench`: run suites, render reports, manage the pinned stacks."""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import shlex
import signal
import sys
import time
from pathlib import Path

from bench.commands import bundle as bundle_cmd
from bench.publish import results
from bench.run import external_stacks, stacks, suite as suite_mod
from bench.run.session import RunOptions, Session, SessionError, add_run_options
from bench.datasets.hub import DatasetError
from bench.inputs import InputError, check_environment, finite_float, folder, output_file, terminal_safe
from bench.paths import cache_dir


# Exit codes of `gnnbench`: 0 every cell ran (or was skipped or refused for a stated reason);
# EXIT_CELLS_FAILED a cell failed or timed out (its result is recorded with the others); 2 bad input
# (nothing was run); EXIT_NOT_WRITTEN the result file or table could not be written where asked
# (the message says where the numbers are); EXIT_INTERRUPTED ended by Ctrl-C, SIGTERM or SIGHUP
# (finished cells are kept); EXIT_INTERNAL a defect of gnnbench itself (one line; --debug shows the
# traceback).
EXIT_CELLS_FAILED = 1
EXIT_BAD_INPUT = 2
EXIT_NOT_WRITTEN = 3
EXIT_INTERRUPTED = 130
EXIT_INTERNAL = 70  # EX_SOFTWARE in sysexits.h
FAILED = ("failed", "timeout")
# What a bad input raises: its message names the input; `gnnbench` prints it and exits 2.
BAD_INPUT = (InputError, suite_mod.SuiteError, SessionError, results.ResultsError, stacks.StackError, DatasetError,
             external_stacks.ExternalStackError)


def main(argv: list[str] | None = None) -> int:
    debug = argparse.ArgumentParser(add_help=False)  # `--debug` before or after the command
    debug.add_argument("--debug", action="store_true", default=argparse.SUPPRESS,
                       help="on an error, show Python's traceback too")
    parser = argparse.ArgumentParser(prog="gnnbench", description=__doc__, parents=[debug])
    sub = parser.add_subparsers(dest="command", required=True)

    run = sub.add_parser("run", parents=[debug], help="run a suite, write its result file, then print its table")
    run.add_argument("suite", nargs="?", default=None,
                     help="suite name in suites/ or a YAML path (default: gpu where a GPU is visible, else smoke)")
    run.add_argument("-k", dest="select", metavar="EXPR", help="only cells whose id matches (pytest's -k rules)")
    add_run_options(run.add_argument)

    report = sub.add_parser("report", parents=[debug], help="render result files as Markdown tables and/or a static HTML site")
    report.add_argument("files", nargs="+", type=Path)
    report.add_argument("--markdown", type=Path, metavar="FILE",
                        help="write the Markdown tables here (default: stdout, unless --html or --readme is given)")
    report.add_argument("--html", type=Path, metavar="DIR",
                        help="build the static site here: index.html, a page per suite, environment.html")
    report.add_argument("--readme", type=Path, metavar="FILE",
                        help="write the Markdown index of the results here (what results/README.md is)")
    report.add_argument("--command", dest="produced_by", metavar="TEXT", help="the command that produced the results, shown under the table")
    report.add_argument("--force", action="store_true",
                        help="write --markdown/--readme even over one of the input files or another result file")

    rec = sub.add_parser("recover", parents=[debug],
                         help="write a run's result file from its journal (.cells.jsonl), running nothing")
    rec.add_argument("journal", type=Path, help="the run's SUITE-STAMP.cells.jsonl")
    rec.add_argument("--suite", metavar="NAME|PATH",
                     help="the run's suite: the cells the journal lacks are listed as not run")
    rec.add_argument("--out", type=Path, metavar="FILE",
                     help="the result file to write (default: SUITE-STAMP.json beside the journal, if not there yet)")
    rec.add_argument("--force", action="store_true", help="replace the --out file if it is already there")

    cmp = sub.add_parser("compare", parents=[debug], help="verdicts for NEW against OLD, beyond the measured noise")
    cmp.add_argument("old", type=Path, help="the earlier result file")
    cmp.add_argument("new", type=Path, help="the later result file")
    cmp.add_argument("--floor", type=finite_float(0, 10), default=0.10, help="least relative change ever called (default 0.10)")
    cmp.add_argument("--force", action="store_true", help="compare runs of different machines anyway")
    cmp.add_argument("--history", type=Path, action="append", default=[], metavar="FILE",
                     help="an earlier run of the suite, for each cell's own run-to-run noise (repeatable)")
    cmp.add_argument("--fail-on", choices=["regression"], help="exit 1 when a cell regressed or now fails")

    fid = sub.add_parser("fidelity", parents=[debug],
                         help="what the harness costs: each cell's epoch against the plain loop its framework's examples write")
    fid.add_argument("suite", nargs="?", default="smoke", help="suite name in suites/ or a YAML path")
    fid.add_argument("-k", dest="select", metavar="EXPR", help="only cells whose id matches (pytest's -k rules)")
    fid.add_argument("--rounds", type=int, default=3, help="interleaved rounds of cell and plain loop (default 3)")
    fid.add_argument("--out", type=Path, metavar="FILE",
                     help="the comparison's JSON (a Markdown table beside it); default: results/runs/fidelity-<suite>-STAMP.json")

    ovh = sub.add_parser("overhead", parents=[debug],
                         help="what the stage timings cost: each cell's epoch with profile on against off, interleaved in one process")
    ovh.add_argument("suite", nargs="?", default="profile-overhead", help="suite name in suites/ or a YAML path")
    ovh.add_argument("-k", dest="select", metavar="EXPR", help="only cells whose id matches (pytest's -k rules)")
    ovh.add_argument("--epochs", type=int, default=20, help="measured epochs of each side, alternating (default 20)")
    ovh.add_argument("--out", type=Path, metavar="FILE",
                     help="the measurement's JSON (a Markdown table beside it); default: results/runs/overhead-<suite>-STAMP.json")
    for p in (fid, ovh):
        p.add_argument("--data-root", type=Path, metavar="DIR", default=os.environ.get("GNNBENCH_DATA_ROOT"),
                       help="where raw dataset files are looked for first (env GNNBENCH_DATA_ROOT)")
        p.add_argument("--cache-dir", metavar="DIR", help="dataset hub folder (env GNNBENCH_CACHE)")

    ds = sub.add_parser("datasets", help="known datasets, their sizes and memory needs; prepare one")
    ds_sub = ds.add_subparsers(dest="datasets_command", required=True)
    ds_list = ds_sub.add_parser("list", parents=[debug], help="the known datasets with their sizes")
    ds_info = ds_sub.add_parser("info", parents=[debug], help="sizes and the memory each backend will need")
    ds_prep = ds_sub.add_parser("prepare", parents=[debug], help="materialise a dataset into the hub (downloads if needed)")
    ds_check = ds_sub.add_parser("check", parents=[debug],
                                 help="check your own graph's files (SOURCE:PATH) and convert them into the hub; "
                                      "a bad file is one error naming it (exit 2)")
    for p in (ds_list, ds_info, ds_prep, ds_check):
        p.add_argument("--cache-dir", metavar="DIR", help="dataset hub folder (env GNNBENCH_CACHE)")
    for p in (ds_info, ds_prep):
        p.add_argument("name", help="e.g. planetoid:Cora, ogb:ogbn-arxiv, reddit, synthetic:scale=14, npy:/data/mygraph")
    ds_check.add_argument("name", metavar="SOURCE:PATH",
                          help="npy:DIR, pyg-file:FILE, graphbolt:DIR or edge-list:DIR (README: Your own graph)")
    ds_prep.add_argument("--data-root", metavar="DIR", default=os.environ.get("GNNBENCH_DATA_ROOT"),
                         help="where raw files are looked for first (env GNNBENCH_DATA_ROOT)")

    st = sub.add_parser("stacks", help="the framework environments: pinned ones, and interpreters you register")
    st_sub = st.add_subparsers(dest="stacks_command", required=True)
    inst = st_sub.add_parser("install", parents=[debug], help="create (or reuse) each stack's virtual environment")
    inst.add_argument("names", nargs="*", help="default: all stacks")
    inst.add_argument("--force", action="store_true", help="rebuild even if the pins are unchanged")
    st_sub.add_parser("list", parents=[debug], help="stacks, where they are, and the versions that import")
    add = st_sub.add_parser("add", parents=[debug],
                            help="register an interpreter you already have (conda env, container, module) as a stack")
    add.add_argument("name", help="the name suites and --stack use for it")
    add.add_argument("--python", required=True, metavar="PATH", help="its python executable (nothing is installed into it)")
    add.add_argument("--timeout", type=finite_float(1, 24 * 3600), default=external_stacks.PROBE_TIMEOUT_S, metavar="S",
                     help=f"seconds to wait for its imports (default {external_stacks.PROBE_TIMEOUT_S:g})")
    rm = st_sub.add_parser("remove", parents=[debug], help="forget an external stack (its environment is left as it is)")
    rm.add_argument("name")

    bundle_cmd.add_parser(sub, [debug])

    args = parser.parse_args(argv)
    try:
        return dispatch(args)
    except KeyboardInterrupt:  # outside a run (which keeps its cells and says how to resume)
        print(f"gnnbench: interrupted ({args.command})", file=sys.stderr)
        return EXIT_INTERRUPTED
    except Exception as exc:  # noqa: BLE001 - a defect of gnnbench: one line, the traceback on --debug
        if getattr(args, "debug", False):
            raise
        print(f"gnnbench: internal error: {type(exc).__name__}: {exc}\n(run the same command with --debug for "
              "the traceback, and report it)", file=sys.stderr)
        return EXIT_INTERNAL


def dispatch(args) -> int:
    """Run the parsed command; bad input is one line and exit 2."""
    try:
        check_environment()
        if args.command == "run":
            return cmd_run(args)
        if args.command == "report":
            return cmd_report(args.files, args.markdown, command=args.produced_by, html=args.html,
                              readme=args.readme, force=args.force)
        if args.command == "recover":
            return cmd_recover(args)
        if args.command == "compare":
            return cmd_compare(args)
        if args.command == "datasets":
            return cmd_datasets(args)
        if args.command == "fidelity":
            return cmd_fidelity(args)
        if args.command == "overhead":
            return cmd_overhead(args)
        if args.command == "bundle":
            return bundle_cmd.run(args)
        if args.stacks_command == "install":
            for name in args.names or list(stacks.available()):
                stacks.install(name, force=args.force)
            return 0
        if args.stacks_command == "add":
            external_stacks.add(args.name, args.python, timeout=args.timeout)
            return 0
        if args.stacks_command == "remove":
            external_stacks.remove(args.name)
            print(f"stack {args.name}: forgotten (its environment was not touched)")
            return 0
        return cmd_stacks_list()
    except BAD_INPUT as exc:
        if getattr(args, "debug", False):
            raise
        print(f"gnnbench: error: {terminal_safe(str(exc))}", file=sys.stderr)
        return EXIT_BAD_INPUT
    except OSError as exc:  # a file or folder the system refused (the run handles its own)
        if getattr(args, "debug", False) or args.command == "run":
            raise
        print(f"gnnbench: error: {exc.filename or ''}{': ' if exc.filename else ''}{exc.strerror or exc}",
              file=sys.stderr)
        return EXIT_BAD_INPUT


def default_suite() -> tuple[str, str]:
    """The suite `gnnbench run` takes when none is named, and why."""
    from bench.run import gpus

    shown = gpus.visible()
    if shown:
        return "gpu", f"{len(shown)} GPU(s) visible ({', '.join(dict.fromkeys(shown.names))}; {shown.how})"
    return "smoke", f"no GPU visible ({shown.how})"


def cmd_run(args) -> int:
    if args.suite is None:
        args.suite, why = default_suite()
        print(f"gnnbench: no suite named: running {args.suite!r} because {why}; name a suite to choose "
              "(gnnbench run smoke | gpu | multi-gpu | ...)", flush=True)
    session = Session(RunOptions.from_namespace(args), select=args.select)
    interrupted = False
    try:
        with ending_as_interrupt():
            session.run()
    except KeyboardInterrupt:
        interrupted = True
    path = session.written_to or session.result_path
    code = 0
    if session.write_problem:
        print(f"gnnbench: {session.write_problem}", file=sys.stderr)
        code = EXIT_NOT_WRITTEN
    elif session.written_to:
        markdown = path.with_suffix(".md")
        command = "gnnbench run " + " ".join(shlex.quote(a) for a in sys.argv[2:]) if sys.argv[1:2] == ["run"] else None
        try:
            cmd_report([path], markdown, command=command, force=True)  # this run's own table
            print(terminal_safe(markdown.read_text()))
            print(f"results: {path}\ntable:   {markdown}")
        except (OSError, InputError) as exc:
            print(f"gnnbench: could not write the table {markdown} ({getattr(exc, 'strerror', None) or exc}); every number is in "
                  f"{path} (gnnbench report {path})", file=sys.stderr)
            code = EXIT_NOT_WRITTEN
    done = sum(c.id in session.finished for c in session.selected)
    if interrupted:
        print(f"gnnbench: interrupted after {done} of {len(session.selected)} cells; finish the run with\n"
              f"  gnnbench run {shlex.quote(str(session.suite_path))} --resume {shlex.quote(str(session.journal.path))}",
              file=sys.stderr)
        return EXIT_INTERRUPTED
    failed = [c.id for c in session.selected if session.finished[c.id].status in FAILED]
    if failed:
        print(f"gnnbench: {len(failed)} of {len(session.selected)} cells failed or timed out "
              f"(the table says why): {', '.join(failed)}", file=sys.stderr)
    return code or (EXIT_CELLS_FAILED if failed else 0)


@contextlib.contextmanager
def ending_as_interrupt():
    """SIGTERM and SIGHUP end the run as Ctrl-C does: the running cell's processes are stopped
    and the finished cells are written, instead of dying with workers left behind."""
    def interrupt(signum, frame):
        raise KeyboardInterrupt(signal.Signals(signum).name)

    previous = {sig: signal.signal(sig, interrupt) for sig in (signal.SIGTERM, signal.SIGHUP)}
    try:
        yield
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler)


def chosen_cells(args, keep, needs: str):
    """The suite's cells (after -k) that `keep` accepts; an input error naming `needs` if none."""
    from bench.run.session import select_cells

    suite, _ = suite_mod.load(args.suite)
    cells = suite_mod.expand(suite)
    cells = select_cells(cells, args.select) if args.select else cells
    chosen = [c for c in cells if keep(c)]
    if not chosen:
        raise InputError(f"suite {suite.name!r}{f' -k {args.select!r}' if args.select else ''}: no cell {needs}")
    return suite, chosen


def results_path(args, kind: str, suite_name: str) -> Path:
    import datetime as dt

    from bench.paths import default_results_dir

    stamp = dt.datetime.now(dt.timezone.utc).strftime("%Y%m%dT%H%M%SZ")
    return args.out or default_results_dir() / f"{kind}-{suite_name}-{stamp}.json"


def cmd_fidelity(args) -> int:
    from bench.run import fidelity

    if args.rounds < 1:
        raise InputError(f"--rounds {args.rounds}: give at least 1")
    suite, chosen = chosen_cells(args, fidelity.comparable,
                                 f"a plain loop exists for (one rank, cpu-cpu, store memory, model sage, backend "
                                 f"one of {', '.join(fidelity.PLAIN_BACKENDS)})")
    out = results_path(args, "fidelity", suite.name)
    print(f"fidelity: {len(chosen)} cell(s) of {suite.name}, {args.rounds} interleaved round(s) each")
    try:
        found = fidelity.compare(chosen, cache_dir(args.cache_dir, writable=True), args.data_root, args.rounds)
    except fidelity.FidelityError as exc:
        print(f"gnnbench: {exc}", file=sys.stderr)
        return EXIT_CELLS_FAILED
    fidelity.write(found, out, "gnnbench " + " ".join(shlex.quote(a) for a in sys.argv[1:]))
    print(fidelity.table(found))
    print(f"results: {out}")
    return 0 if all(c.faithful for c in found) else EXIT_CELLS_FAILED


def cmd_overhead(args) -> int:
    from bench.run import overhead

    if args.epochs < 1:
        raise InputError(f"--epochs {args.epochs}: give at least 1")
    suite, chosen = chosen_cells(args, overhead.measurable, "of one rank (world_size: 1)")
    out = results_path(args, "overhead", suite.name)
    print(f"overhead: {len(chosen)} cell(s) of {suite.name}, profile on and off, {args.epochs} epochs each, interleaved")
    found = overhead.measure(chosen, cache_dir(args.cache_dir, writable=True), args.data_root, args.epochs)
    overhead.write(found, out, "gnnbench " + " ".join(shlex.quote(a) for a in sys.argv[1:]))
    print(overhead.table(found))
    print(f"results: {out}")
    return 0 if all(r.within_goal for r in found) else EXIT_CELLS_FAILED


def cmd_datasets(args) -> int:
    from bench.datasets import info as dataset_info
    from bench import datasets
    from bench.run.runner import ensure_dataset

    cache = cache_dir(args.cache_dir, writable=args.datasets_command in ("prepare", "check"))
    if args.datasets_command == "list":
        print("\n".join(dataset_info.list_lines(cache)))
        return 0
    try:
        spec = datasets.parse_name(args.name)
        datasets.check_params(spec)  # the rules a suite's `params` obey
    except ValueError as exc:
        raise DatasetError(f"{exc} (`gnnbench datasets list` shows the known datasets)") from None
    if args.datasets_command == "check":
        return cmd_datasets_check(spec, cache)
    if args.datasets_command == "prepare":
        from bench.datasets.hub import sweep_stale

        sweep_stale(cache)
        if args.data_root:
            folder(f"--data-root {args.data_root}", args.data_root, writable=False)
        stack = datasets.stack_of(spec["source"])
        if stack:
            stacks.install(stack)
        print(f"preparing {args.name} ...", flush=True)
        from bench.datasets import hub

        there = hub.is_materialised(spec, cache)
        started = time.perf_counter()
        ensure_dataset(spec, cache, Path(args.data_root) if args.data_root else None, interactive=True)
        print("already in the hub" if there else f"prepared in {time.perf_counter() - started:.1f} s")
    print("\n".join(dataset_info.info_lines(spec, cache)))
    return 0


def cmd_datasets_check(spec: dict, cache: Path) -> int:
    """`gnnbench datasets check SOURCE:PATH`: a user's graph checked and converted into the hub
    (the next run reuses it); a bad file is a DatasetError naming it (exit 2)."""
    from bench import datasets
    from bench.datasets import hub, info as dataset_info
    from bench.run.runner import ensure_dataset

    if not datasets.user_files(spec["source"]):
        mine = [s for s in datasets.SOURCES if datasets.user_files(s)]
        raise DatasetError(f"{spec['name']}: `datasets check` reads your own graph's files; allowed: "
                           f"{', '.join(f'{s}:PATH' for s in mine)} (`gnnbench datasets prepare` for the others)")
    hub.sweep_stale(cache)
    there = hub.is_materialised(spec, cache)
    stack = datasets.stack_of(spec["source"])
    if stack and not there:
        stacks.install(stack)
    print(f"checking {spec['source']}:{spec['params'].get('path')} ...", flush=True)
    started = time.perf_counter()
    ensure_dataset(spec, cache, None)  # the messages of a stack's interpreter come back as one line
    print("already checked and converted (its files are unchanged since)" if there
          else f"ok: checked and converted in {time.perf_counter() - started:.1f} s")
    print("\n".join(dataset_info.info_lines(spec, cache)))
    return 0


def cmd_report(files: list[Path], markdown: Path | None, command: str | None = None,
               html: Path | None = None, readme: Path | None = None, force: bool = False) -> int:
    from bench.publish.report import render_markdown

    seen: dict[Path, Path] = {}
    for path in files:
        same = seen.get(path.resolve())
        if same is not None:
            raise InputError(f"{path}: given twice ({same} is the same file); allowed: each result file once")
        seen[path.resolve()] = path
    for option, path in (("--markdown", markdown), ("--readme", readme)):
        if path:
            output_file(f"{option} {path}", path)
            if not force:
                refuse_overwrite(option, path, inputs=seen)
    if html:
        folder(f"--html {html}", html, writable=True)
    read = [read_result(f) for f in files]  # every file is checked before anything is written
    if html or readme:
        from bench.publish import site

        if html:
            pages = site.build(read, html, command=command)
            print(f"site: {len(pages)} pages in {html} (open {html / 'index.html'})")
        if readme:
            readme.write_text(site.render_readme(read, notes_for(readme)))
            print(f"readme: {readme}")
        if not markdown:
            return 0
    text = render_markdown(read, command=command)
    if markdown:
        markdown.write_text(text)
    else:
        print(terminal_safe(text))
    return 0


def refuse_overwrite(option: str, path: Path, inputs: dict[Path, Path]) -> None:
    """Never write a table over an input, or over a file that holds results (JSON, a journal)."""
    from bench.run import recover

    if path.resolve() in inputs:
        raise InputError(f"{option} {path}: that is one of the result files being read; give another file "
                         "(or --force to replace it)")
    if path.exists() and (path.suffix == ".json" or recover.is_journal(path)):
        raise InputError(f"{option} {path}: a result file is already there; give another file (or --force "
                         "to replace it)")


def read_result(path: Path) -> results.RunResult:
    """A result file, or a run's journal read as the result file `gnnbench recover` writes."""
    from bench.run import recover

    if recover.is_journal(path):
        return results.of_document(recover.document(path), path)
    return results.read(path)


def cmd_recover(args) -> int:
    from bench.run import recover
    from bench.run.session import write_whole

    out = args.out or recover.default_output(args.journal)
    if out.exists() and not args.force:
        made_by = "the run wrote it" if args.out is None else "gnnbench did not write it in this command"
        raise SessionError(f"{out} is already there ({made_by}); give --out FILE to write another, or --force "
                           "to replace it")
    if out.resolve() == Path(args.journal).resolve():
        raise SessionError(f"--out {out}: that is the journal being read; give another file")
    doc = recover.document(args.journal, args.suite)
    read = results.of_document(doc, out)  # checked as any result file is, before it is written
    try:
        write_whole(out, json.dumps(doc, indent=4))
    except OSError as exc:
        print(f"gnnbench: could not write {out} ({exc.strerror or exc}); the cells are still in "
              f"{args.journal}", file=sys.stderr)
        return EXIT_NOT_WRITTEN
    not_run = sum(c.status == results.NOT_RUN for c in read.cells)
    print(f"recovered {len(read.cells) - not_run} finished cells of suite {read.suite!r} "
          f"({len(read.measured)} measured)" + (f", {not_run} not run" if not_run else "")
          + f" from {args.journal}\nresults: {out}")
    return 0


def notes_for(readme: Path) -> str | None:
    """Hand-written notes kept beside the generated README (NOTES.md), included verbatim."""
    notes = readme.parent / "NOTES.md"
    return notes.read_text() if notes.exists() else None


def cmd_compare(args) -> int:
    from bench.publish import history

    old, new = results.read(args.old), results.read(args.new)
    verdicts = history.compare(old, new, floor=args.floor, force=args.force,
                               history=[results.read(f) for f in args.history])
    print(terminal_safe(history.run_line("old", old)))
    print(terminal_safe(history.run_line("new", new)))
    print(terminal_safe(history.verdict_table(verdicts, floor=args.floor)))
    if args.fail_on == "regression" and any(v.verdict in ("regression", "now failing") for v in verdicts):
        return 1
    return 0


def cmd_stacks_list() -> int:
    for name, stack in stacks.available().items():
        if stack.installed:
            versions = stacks.probe_versions(stack)
            print(f"{name}: installed at {stack.path}")
            print("   " + ", ".join(f"{k} {v}" for k, v in versions.items()))
            sampler = stacks.recorded_sampler(stack.path)
            if sampler:
                print(f"   sampler: {stacks.sampler_summary(sampler)}")  # PyG's wheel index, or the fallback and why
        else:
            print(f"{name}: not installed (gnnbench stacks install {name}); pins: {stack.requirements}")
    for name, stack in external_stacks.registered().items():
        state = "" if stack.installed else " (its interpreter is gone)"
        print(f"{name}: external, {stack.python}{state}, for {', '.join(stack.frameworks)} backends "
              f"(added {stack.added})")
        print("   " + ", ".join(f"{k} {v}" for k, v in stack.versions.items()))
    return 0


if __name__ == "__main__":
    sys.exit(main())

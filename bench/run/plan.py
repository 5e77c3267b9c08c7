"""The plan: which cells a run measures and how they are paired. The suite (loaded) and the options
turned into cells (--stack, --mode, --seed), the -k selection, the baseline and the paired settings,
checked. Pure: it reads and writes no file and starts nothing; the session loads the suite, keeps the
journal and hands the plan to the schedulers."""

from __future__ import annotations

from dataclasses import dataclass

from pydantic import ValidationError

from bench.backends import BACKENDS
from bench.run import paired, record, suite as suite_mod
from bench.run.suite import Cell


class SessionError(ValueError):
    """A run that cannot start as asked (options, a journal to resume): nothing was measured."""


@dataclass(frozen=True)
class Plan:
    suite: suite_mod.Suite  # as the options changed it
    cells: list[Cell]  # every cell of that suite
    selected: list[Cell]  # those -k kept
    baseline: str | None
    pairing: suite_mod.Paired | None
    not_run: list[str]  # backends an option left without a cell (said, and kept in the result)


def make(suite: suite_mod.Suite, options, select: str | None = None, say=print) -> Plan:
    """The plan for `suite` as the run's options (bench.run.session.RunOptions) and the -k expression
    `select` ask; SessionError where they cannot be."""
    as_written = suite  # before --stack, --mode and --seed change its axes
    not_run: list[str] = []
    for given, replace in ((options.stack, suite_mod.with_stacks), (options.mode, suite_mod.with_mode)):
        if given:
            suite, left = replace(suite, given)
            not_run += left
    if options.seed:
        suite = suite_mod.with_seeds(suite, options.seed)
    for note in not_run:
        say(note)
    pairing = paired_settings(suite.paired, options)
    cells = suite_mod.expand(suite)
    selected = select_cells(cells, select) if select else list(cells)
    check_pairing(pairing, selected, options.paired or [], say,
                  suite_cells=suite_mod.expand(as_written) if pairing else ())
    return Plan(suite, cells, selected, suite.baseline or (cells[0].id if cells else None), pairing, not_run)


EQUALS = "[eq]"  # `=` stands for this inside a -k expression, whose grammar has no bare `=`


def select_cells(cells: list[Cell], expression: str) -> list[Cell]:
    """The cells whose pytest name matches a `-k` expression, where KEY=VALUE matches a setting exactly
    (by its name or short name) and task=NAME the backend's task. No match is an error listing the cells."""
    from _pytest.mark.expression import Expression  # pytest's own -k grammar

    try:
        compiled = Expression.compile(expression.replace("=", EQUALS))
    except SyntaxError as exc:
        raise SessionError(f"-k {expression!r}: {exc.msg}") from None
    chosen = [c for c in cells if compiled.evaluate(lambda word, cell=c: _word_matches(word.replace(EQUALS, "="), cell))]
    if not chosen:
        listed = "\n  ".join(c.id for c in cells[:40]) + (f"\n  ... and {len(cells) - 40} more" if len(cells) > 40 else "")
        raise SessionError(f"-k {expression!r} selects none of the suite's {len(cells)} cells; they are:\n  {listed}\n"
                           "(a word matches part of a cell id; KEY=VALUE matches a setting exactly)")
    return chosen


SHORT_NAMES = {short: key for key, short in (suite_mod.ID_ALWAYS | suite_mod.ID_SHORT).items()}


def _word_matches(word: str, cell: Cell) -> bool:
    if "=" not in word:
        return word.lower() in record.test_name(cell.id).lower()
    key, _, wanted = word.partition("=")
    if word.lower() in (part.lower() for part in cell.id.split("/")):
        return True
    key = SHORT_NAMES.get(key, key)
    # task: the backend's (bench/tasks.py): node, typed-node, link, graph
    named = {"backend": cell.backend, "dataset": cell.dataset, "task": BACKENDS[cell.backend].task}
    if key in named:
        return named[key] == wanted
    value = cell.settings.as_dict().get(key)
    if value is None and key != "stack":  # not a setting of this cell
        return False
    shown = "-".join(map(str, value)) if isinstance(value, list) else str(value)
    return shown.lower() == wanted.lower() or (key == "stack" and value is None and wanted == cell.stack)


def paired_settings(from_suite: suite_mod.Paired | None, options) -> suite_mod.Paired | None:
    """The suite's `paired`, with --paired's axes added and --paired-within / -launches / -rounds."""
    given = {"by": [*(from_suite.by if from_suite else []), *(options.paired or [])],
             **{k: v for k, v in (("within", options.paired_within), ("launches", options.paired_launches),
                                  ("rounds", options.paired_rounds)) if v is not None}}
    if given == {"by": []}:
        return None
    if not given["by"]:
        raise SessionError("--paired-within, --paired-launches and --paired-rounds need cells to pair: give "
                           "--paired AXIS (e.g. --paired backend), or a suite with `paired`")
    try:
        return suite_mod.Paired.model_validate({**(from_suite.model_dump() if from_suite else {}), **given})
    except ValidationError as exc:
        problems = "; ".join(f"{'.'.join(map(str, e['loc'][:1])) or 'paired'}: {e['msg']}" for e in exc.errors())
        raise SessionError(f"--paired: {problems}") from None


def check_pairing(pairing: suite_mod.Paired | None, cells: list[Cell], given: list[str], say,
                  suite_cells: list[Cell] = ()) -> None:
    """SessionError naming an axis given with --paired that pairs no two of the cells, and why (the runner
    axis pairs each with its twin): a run that compared nothing must not read as one that found no
    difference. A suite's own axis that pairs none of the cells selected (or left by --stack, --mode) but
    some of the suite file's cells is said, and the run goes on."""
    for axis in [a for a in pairing.by if a != paired.RUNNER and cells and not paired.pairs_of(cells, [a])] if pairing else []:  # noqa: E501
        values = sorted({repr(({"backend": c.backend, "dataset": c.dataset} | c.settings.as_dict()).get(axis)) for c in cells})
        why = (f"only one cell is selected ({cells[0].id})" if len(cells) == 1 else
               f"every selected cell has {axis} {values[0]}" if len(values) == 1 else
               f"those with another {axis} ({', '.join(values)}) differ in another setting too")
        if axis in given or not paired.pairs_of(list(suite_cells) or cells, [axis]):
            raise SessionError(f"paired by {axis}: no two selected cells differ in {axis} alone: {why}; give an axis "
                               "the suite sweeps, or select cells that differ in it")
        say(f"paired by {axis} (the suite's): no two selected cells differ in {axis} alone ({why}): none paired by it")

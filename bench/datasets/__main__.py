"""`python -m bench.datasets prepare SPEC_JSON CACHE [DATA_ROOT]`: materialise one dataset in
this interpreter (the runner calls it inside the stack a source needs). SIGTERM (what the host sends
when it is interrupted) ends it as Ctrl-C does: its half-written folder is removed, exit 130."""

import json
import signal
import sys
from pathlib import Path

from bench.datasets import hub, materialiser
from bench.inputs import TerminalSafe


def _interrupt(signum, frame):
    raise KeyboardInterrupt(signal.Signals(signum).name)


if __name__ == "__main__":
    _, command, spec_json, cache, *rest = sys.argv
    assert command == "prepare", command
    signal.signal(signal.SIGTERM, _interrupt)
    sys.stderr = TerminalSafe(sys.stderr)  # shown on the user's terminal where the build is interactive
    spec = json.loads(spec_json)
    try:
        path = materialiser(spec["source"])(spec, Path(cache), Path(rest[0]) if rest and rest[0] else None)
    except hub.DatasetError as exc:
        print(f"error: {exc}", file=sys.stderr)
        sys.exit(2)
    except KeyboardInterrupt as exc:
        print(f"error: preparing {spec['name']!r} was interrupted ({exc or 'SIGINT'}); nothing was kept",
              file=sys.stderr)
        sys.exit(130)
    print(path)

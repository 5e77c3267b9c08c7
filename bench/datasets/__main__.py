"""`python -m bench.datasets prepare SPEC_JSON CACHE [DATA_ROOT]`: materialise one dataset in
this interpreter (the runner calls it inside the stack a source needs)."""

import json
import sys
from pathlib import Path

from bench.datasets import hub, materialiser

if __name__ == "__main__":
    _, command, spec_json, cache, *rest = sys.argv
    assert command == "prepare", command
    spec = json.loads(spec_json)
    try:
        path = materialiser(spec["source"])(spec, Path(cache), Path(rest[0]) if rest and rest[0] else None)
    except hub.DatasetError as exc:
        print(f"error: {exc}", file=sys.stderr)
        sys.exit(2)
    print(path)

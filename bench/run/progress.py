"""The line protocol between a worker (inside a stack) and its runner (the host): a progress event
is one stdout line, PROGRESS_TAG followed by a JSON object. Both sides import this module (plain:
it runs in either interpreter), so the runner need not import the worker."""

from __future__ import annotations

import json

PROGRESS_TAG = "GNNBENCH-PROGRESS "


def progress(**event) -> None:
    print(PROGRESS_TAG + json.dumps(event), flush=True)


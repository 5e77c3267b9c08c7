"""The `podman build` options that give an image build this machine's pip: its index, extra
indexes, find-links, CA bundle and constraints as build arguments (the bench-cpu stage declares
them), the local folders and files they name mounted read-only, and pip's cache mounted
read-write (so wheels built for the local stacks, torch-sparse and torch-scatter, are reused).

    python3 docker/host_pip.py    # one option per line, for `mapfile -t`

Used by docker/image-test.sh where the machine installs torch from its own wheels rather than
from the PyTorch CPU index (the Dockerfile's default).
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

# pip's setting -> the build argument (and environment variable) pip reads it from
SETTINGS = {"index-url": "PIP_INDEX_URL", "extra-index-url": "PIP_EXTRA_INDEX_URL",
            "find-links": "PIP_FIND_LINKS", "cert": "PIP_CERT", "constraint": "PIP_CONSTRAINT"}
# single files are mounted here (not at their own path: the image's apt owns /etc/ssl/certs)
FILES_AT = "/opt/host-pip"
PIP_CACHE_IN_BUILD = "/root/.cache/pip"


def effective_settings(listing: str) -> dict[str, str]:
    """`pip config list` output -> setting: value, environment over files (as pip applies them)."""
    found: dict[str, str] = {}
    for line in listing.splitlines():
        key, _, value = line.partition("=")
        scope, _, name = key.partition(".")
        if name in SETTINGS and (scope == ":env:" or name not in found):
            found[name] = value.strip().strip("'\"")
    return found


def local_path(location: str) -> Path | None:
    """The local file or folder a pip location names (file:// URL or path); None for http(s)."""
    if location.startswith("file://"):
        return Path(location.removeprefix("file://"))
    return Path(location) if location.startswith("/") else None


def mount_root(path: Path) -> Path:
    """What to mount for a local index: a PEP 503 index's `simple/` links its files relative to
    its parent (../../files/...), so the parent goes in whole."""
    return path.parent if path.name == "simple" else path


def build_options(settings: dict[str, str], pip_cache: Path) -> list[str]:
    options = [f"--volume={pip_cache}:{PIP_CACHE_IN_BUILD}"]
    mounted: set[Path] = set()
    for name, value in settings.items():
        values = []
        for location in value.split():
            path = local_path(location)
            if path is None:
                values.append(location)
            elif path.is_file():
                inside = f"{FILES_AT}/{name}-{path.name}"
                options.append(f"--volume={path}:{inside}:ro")
                values.append(inside)
            elif path.is_dir():
                root = mount_root(path)
                if root not in mounted:
                    mounted.add(root)
                    options.append(f"--volume={root}:{root}:ro")
                values.append(location)
            else:
                raise SystemExit(f"pip's {name} names {location}, which does not exist on this machine")
        options.append(f"--build-arg={SETTINGS[name]}={' '.join(values)}")
    return options


def main() -> None:
    pip = [sys.executable, "-m", "pip"]
    listing = subprocess.run(pip + ["config", "list"], capture_output=True, text=True, check=True).stdout
    cache = Path(subprocess.run(pip + ["cache", "dir"], capture_output=True, text=True, check=True).stdout.strip())
    cache.mkdir(parents=True, exist_ok=True)
    print("\n".join(build_options(effective_settings(listing), cache)))


if __name__ == "__main__":
    main()

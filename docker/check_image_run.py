"""What a run in the CPU image must leave on the host (make image-test; docker/image-test.sh):

    python docker/check_image_run.py RESULT.json IMAGE REVISION

- the result file belongs to the user who ran it (not to root or the image's user);
- its machine_info names the image and the revision it was built from;
- at least one cell was measured and none failed;
- every stack in the image has the local stack's packages at the same versions for each pinned
  package (the same pin files, so the same `pip freeze` for them), and records the same versions.
Each failed check is one line naming what differs; exit status 1 if any.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from bench import stacks  # noqa: E402

# Run in the image: each stack's installed distributions, by the stacks module's own paths.
LIST_IN_IMAGE = (
    "import json, subprocess\n"
    "from bench import stacks\n"
    "print(json.dumps({n: {'path': str(s.path), 'packages': json.loads(subprocess.run("
    "[str(s.python), '-m', 'pip', 'list', '--format=json'], capture_output=True, text=True, check=True).stdout)}"
    " for n, s in stacks.available().items() if s.installed}))\n"
)


def normalize(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


def pinned_names(stack: stacks.Stack) -> list[str]:
    """The names of the packages the machine's pin set of this stack names."""
    plain, no_isolation = stack.requirement_lines(container=False)
    return [normalize(re.split(r"[<>=!~;\[ ]", line, maxsplit=1)[0]) for line in plain + no_isolation]


def installed(packages: list[dict]) -> dict[str, str]:
    return {normalize(p["name"]): p["version"] for p in packages}


def local_stacks() -> dict[str, dict]:
    out = {}
    for name, stack in stacks.available().items():
        if stack.installed:
            listing = subprocess.run([str(stack.python), "-m", "pip", "list", "--format=json"],
                                     capture_output=True, text=True, check=True).stdout
            out[name] = {"path": str(stack.path), "packages": json.loads(listing)}
    return out


def image_stacks(image: str) -> dict[str, dict]:
    proc = subprocess.run(["podman", "run", "--rm", "--entrypoint", "python", image, "-c", LIST_IN_IMAGE],
                          capture_output=True, text=True)
    if proc.returncode != 0:
        raise SystemExit(f"could not list the stacks in {image}: {proc.stderr[-2000:]}")
    return json.loads(proc.stdout.strip().splitlines()[-1])


def stack_differences(local: dict[str, dict], image: dict[str, dict]) -> list[str]:
    """Pinned packages whose versions differ between a local stack and the image's."""
    problems = []
    for name, stack in stacks.available().items():
        if stack.container_only:
            continue  # built in the GPU images only (cugraph-pyg): neither here nor in bench-cpu
        if name not in local:
            problems.append(f"stack {name}: not installed on this machine (make stacks), nothing to compare with")
            continue
        if name not in image:
            problems.append(f"stack {name}: not installed in the image")
            continue
        if Path(local[name]["path"]).name != Path(image[name]["path"]).name:
            problems.append(f"stack {name}: the image's folder {Path(image[name]['path']).name} is not the local "
                            f"{Path(local[name]['path']).name} (its name hashes the pins and the Python version)")
        here, there = installed(local[name]["packages"]), installed(image[name]["packages"])
        for package in pinned_names(stack):
            if here.get(package) != there.get(package):
                problems.append(f"stack {name}: {package} is {there.get(package, 'absent')} in the image, "
                                f"{here.get(package, 'absent')} on this machine")
    return problems


def result_problems(result: dict, path: Path, image: str, revision: str) -> list[str]:
    problems = []
    owner = path.stat().st_uid
    if owner != os.getuid():
        problems.append(f"{path} belongs to uid {owner}, not to the user who ran it (uid {os.getuid()})")
    ours = result.get("machine_info", {}).get("gnnbench", {})
    if ours.get("container_image") != image:
        problems.append(f"machine_info.gnnbench.container_image is {ours.get('container_image')!r}, not {image!r}")
    if ours.get("container_revision") != revision:
        problems.append(f"machine_info.gnnbench.container_revision is {ours.get('container_revision')!r}, "
                        f"not {revision!r}")
    if not result.get("benchmarks"):
        problems.append(f"{path} has no measured cell")
    failed = [u["id"] for u in result.get("unmeasured", []) if u.get("status") in ("failed", "timeout")]
    if failed:
        problems.append(f"cells failed in the image: {', '.join(failed)}")
    return problems


def recorded_differences(result: dict) -> list[str]:
    """The versions the run recorded for each stack against those recorded by the local install."""
    problems = []
    recorded = result.get("machine_info", {}).get("gnnbench", {}).get("stacks", {})
    for name, stack in stacks.available().items():
        here = stacks.recorded_versions(stack)
        if here and recorded.get(name) != here:
            problems.append(f"stack {name}: the run in the image recorded {recorded.get(name)}, this machine {here}")
    return problems


def main(argv: list[str]) -> int:
    if len(argv) != 3:
        print(__doc__.strip().splitlines()[2].strip(), file=sys.stderr)
        return 2
    path, image, revision = Path(argv[0]), argv[1], argv[2]
    result = json.loads(path.read_text())
    problems = (result_problems(result, path, image, revision) + recorded_differences(result)
                + stack_differences(local_stacks(), image_stacks(image)))
    for line in problems:
        print(f"check: {line}", file=sys.stderr)
    if not problems:
        print(f"check: {path}: owned by uid {os.getuid()}, image {image} at {revision}, "
              f"{len(result['benchmarks'])} cells measured; every pinned package of "
              f"{', '.join(stacks.available())} at the local stacks' versions")
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))

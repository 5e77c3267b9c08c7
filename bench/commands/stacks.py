"""`gnnbench stacks install|list|add|remove`: the framework environments, pinned ones and
interpreters you register."""

from __future__ import annotations

from bench.inputs import finite_float
from bench import paths, stacks
from bench.stacks import external as external_stacks, versions as releases


def add_parser(sub, parents) -> None:
    st = sub.add_parser("stacks", help="the framework environments: pinned ones, and interpreters you register")
    st_sub = st.add_subparsers(dest="stacks_command", required=True)
    inst = st_sub.add_parser("install", parents=parents, help="create (or reuse) each stack's virtual environment")
    inst.add_argument("names", nargs="*", help="default: all stacks")
    inst.add_argument("--force", action="store_true", help="rebuild even if the pins are unchanged")
    st_sub.add_parser("list", parents=parents, help="stacks, where they are, and the versions that import")
    add = st_sub.add_parser("add", parents=parents,
                            help="register an interpreter you already have (conda env, container, module) as a stack")
    add.add_argument("name", help="the name suites and --stack use for it")
    add.add_argument("--python", required=True, metavar="PATH", help="its python executable (nothing is installed into it)")
    add.add_argument("--timeout", type=finite_float(1, 24 * 3600), default=external_stacks.PROBE_TIMEOUT_S, metavar="S",
                     help=f"seconds to wait for its imports (default {external_stacks.PROBE_TIMEOUT_S:g})")
    rm = st_sub.add_parser("remove", parents=parents, help="forget an external stack (its environment is left as it is)")
    rm.add_argument("name")


def run(args) -> int:
    if args.stacks_command == "install":
        for name, stack in stacks.available().items() if not args.names else ():
            if stack.container_only and not stacks.in_container():  # all of them: those a machine builds
                print("skipped: " + stacks.CONTAINER_ONLY_STACK.format(name=name, pins=stack.requirements.name))
        for name in args.names or [n for n, s in stacks.available().items()
                                   if not (s.container_only and not stacks.in_container())]:
            stacks.install(name, force=args.force)
    elif args.stacks_command == "add":
        external_stacks.add(args.name, args.python, pinned=stacks.available(), timeout=args.timeout)
    elif args.stacks_command == "remove":
        external_stacks.remove(args.name)
        print(f"stack {args.name}: forgotten (its environment was not touched)")
    else:
        return list_stacks()
    return 0


def list_stacks() -> int:
    for name, stack in stacks.available().items():
        if stack.installed:
            versions = stacks.probe_versions(stack)
            print(f"{name}: installed at {stack.path}")
            print("   " + ", ".join(f"{k} {v}" for k, v in versions.items()))
            if sampler := paths.recorded_sampler(stack.path):
                print(f"   sampler: {stacks.sampler_summary(sampler)}")  # PyG's wheel index, or the fallback and why
        else:
            print(f"{name}: not installed (gnnbench stacks install {name}); pins: {stack.requirements}")
    for name, stack in stacks.versioned_stacks().items():  # a framework release (bench/stacks/versions.py)
        state = f"installed at {stack.path}" if stack.installed else \
            f"not installed (a suite that names it builds it, or gnnbench stacks install {name})"
        framework, release = releases.split(name)
        print(f"{name}: {state}; pins: {stack.base.requirements.name} with {releases.BASES[framework][1]}=={release}")
    for name, stack in external_stacks.registered().items():
        state = "" if stack.installed else " (its interpreter is gone)"
        print(f"{name}: external, {stack.python}{state}, for {', '.join(stack.frameworks)} backends "
              f"(added {stack.added})")
        print("   " + ", ".join(f"{k} {v}" for k, v in stack.versions.items()))
    return 0

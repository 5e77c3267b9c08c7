"""Whether a stack's CUDA build runs on this machine's driver and GPUs, and which image tag does:
checked before a GPU cell builds anything (the driver's CUDA major against the torch's, each GPU's
compute capability against the torch's kernels). A refusal is one line naming what is missing and
the image tag (IMAGE_TAGS) that has it. Plain values in, so tested without a GPU; stdlib only.
"""

from __future__ import annotations

import contextlib
import re
import subprocess
from dataclasses import dataclass


@dataclass(frozen=True)
class ImageTag:
    tag: str          # the suffix of ghcr.io/gnnbench/gnnbench:<tag>
    cuda: str         # the CUDA version its PyG stacks' torch is built for
    min_driver: str   # the oldest Linux driver that runs it
    capabilities: tuple[tuple[int, int], tuple[int, int]]  # lowest and highest compute capability with kernels
    gpus: str         # in words, for the docs and the messages


# The GPU images (docker/Dockerfile; docs/gpus.md). The capability ranges are those of PyTorch's cu130
# and cu126 wheels' arch lists; the start check reads the real list from the stack's torch.
IMAGE_TAGS = (
    ImageTag("latest", "13.0", "580", ((7, 5), (12, 0)), "Turing (T4) and newer: A100, L4, L40S, H100, H200, B200"),
    ImageTag("latest-cu126", "12.6", "525", ((5, 0), (9, 0)), "Maxwell to Hopper: P100, V100, T4, A100, L40S, H100"),
)


def version_tuple(text: str | None) -> tuple[int, int] | None:
    """'12.6' or 12060 (the driver API's integer) as (12, 6); None where unknown."""
    if text is None or text == "":
        return None
    if isinstance(text, int) or str(text).isdigit():
        number = int(text)
        return (number // 1000, number % 1000 // 10) if number else None
    found = re.match(r"(\d+)\.(\d+)", str(text))
    return (int(found.group(1)), int(found.group(2))) if found else None


def runs_on(capability: tuple[int, int], arch_list: list[str]) -> bool:
    """Whether a torch built for `arch_list` ('sm_75', 'compute_90', ...) has kernels for a GPU of
    `capability`: a cubin for the same major and a minor not above it, or PTX not above it."""
    major, minor = capability
    for arch in arch_list:
        if not (found := re.fullmatch(r"(sm|compute)_(\d+)(\d)[a-z]?", arch)):
            continue
        kind, built = found.group(1), (int(found.group(2)), int(found.group(3)))
        if kind == "sm" and arch.endswith(("a", "f")):  # sm_90a: that exact GPU only
            if built == capability:
                return True
        elif built <= (major, minor) and (kind == "compute" or built[0] == major):  # PTX, or a cubin
            return True
    return False


def tag_for(*, driver: tuple[int, int] | None = None, capability: tuple[int, int] | None = None) -> ImageTag | None:
    """The first image tag that runs on that driver and that GPU, or None."""
    return next((tag for tag in IMAGE_TAGS if (driver is None or driver[0] >= version_tuple(tag.cuda)[0])
                 and (capability is None or tag.capabilities[0] <= capability <= tag.capabilities[1])), None)


def _instead(driver: tuple[int, int] | None, capability: tuple[int, int] | None) -> str:
    """Which image tag to use instead: one that runs here, else this GPU's with the driver it needs."""
    if (tag := tag_for(driver=driver, capability=capability)) is not None:
        return (f"use the image tag :{tag.tag} instead (CUDA {tag.cuda}, driver >= {tag.min_driver}, {tag.gpus}), "
                "or a stack built for it")
    if (tag := tag_for(capability=capability)) is not None:
        return f"update the NVIDIA driver to >= {tag.min_driver} and use the image tag :{tag.tag} (CUDA {tag.cuda}, {tag.gpus})"
    return "no gnnbench image has kernels for it: use a stack of your own (gnnbench stacks add)"


def problem(torch_cuda: str | None, driver_cuda, gpus: list[tuple[str, tuple[int, int]]],
            arch_list: list[str]) -> str | None:
    """One line: why this stack's CUDA build cannot run here, or None. torch_cuda: torch.version.cuda
    ('13.0'); driver_cuda: the driver's CUDA version ('12.4' or 12040; None where unknown); gpus:
    (name, compute capability) per visible GPU; arch_list: torch.cuda.get_arch_list()."""
    built, driver = version_tuple(torch_cuda), version_tuple(driver_cuda)
    if built is not None and driver is not None and driver[0] < built[0]:
        return (f"the NVIDIA driver supports CUDA {driver[0]}.{driver[1]}, and this stack's torch is built for CUDA "
                f"{built[0]}.{built[1]}, which needs a CUDA {built[0]} driver: "
                + _instead(driver, min((tuple(c) for _, c in gpus), default=None)))
    if not arch_list:
        return None  # a torch that lists no kernels (a CPU build): nothing to compare
    for index, (name, capability) in enumerate(gpus):
        if not runs_on(tuple(capability), arch_list):
            return (f"GPU {index} ({name}, compute capability {capability[0]}.{capability[1]}) has no kernels in "
                    f"this stack's torch (built for {' '.join(arch_list)}): "
                    + _instead(driver, tuple(capability)))
    return None


def driver_cuda() -> int | str | None:
    """The CUDA version the installed driver supports (12040, or '12.4'), or None: from torch's
    driver call, else NVML, else nvidia-smi's header."""
    with contextlib.suppress(Exception):  # a CPU build of torch, or no such call
        import torch

        if number := torch._C._cuda_getDriverVersion():  # 0 without a driver
            return number
    with contextlib.suppress(Exception):  # no nvidia-ml-py, no driver
        import pynvml

        pynvml.nvmlInit()
        return pynvml.nvmlSystemGetCudaDriverVersion()
    try:
        found = re.search(r"CUDA Version:\s*(\d+\.\d+)", subprocess.run(["nvidia-smi"], capture_output=True,
                                                                        text=True, timeout=30).stdout)
    except (OSError, subprocess.TimeoutExpired):  # no nvidia-smi
        return None
    return found.group(1) if found else None

"""NVML, optional (`nvidia-ml-py`, a container-only pin): the handle of the GPU a rank trains on,
or why there is none. CUDA and NVML number GPUs differently: `match_index` matches by PCI bus id,
else UUID, else CUDA_VISIBLE_DEVICES. Stdlib only at import.
"""

from __future__ import annotations

import os
from dataclasses import dataclass

NOT_INSTALLED = ("nvidia-ml-py (module pynvml) is not installed in this stack, so NVML cannot be asked; "
                 "install it in the stack (pip install nvidia-ml-py) to record this")


@dataclass
class Device:
    nvml: object  # the pynvml module
    handle: object
    index: int  # NVML's index
    how: str  # how the CUDA device was matched to it


def load():
    """(pynvml, None) once NVML is initialised, else (None, why not)."""
    try:
        import pynvml
    except ImportError:
        return None, NOT_INSTALLED
    try:
        pynvml.nvmlInit()
    except Exception as exc:  # noqa: BLE001 - NVMLError_LibraryNotFound, DriverNotLoaded, ...
        return None, f"NVML did not start ({type(exc).__name__}: {exc}): no NVIDIA driver here?"
    return pynvml, None


def listing(lib) -> list[dict]:
    """NVML's GPUs in its order, each {"index", "uuid", "pci", "handle"}."""
    handles = [lib.nvmlDeviceGetHandleByIndex(i) for i in range(lib.nvmlDeviceGetCount())]
    return [{"index": i, "uuid": lib.nvmlDeviceGetUUID(handle), "pci": lib.nvmlDeviceGetPciInfo(handle).busId,
             "handle": handle} for i, handle in enumerate(handles)]


def normal_pci(bus_id) -> str | None:
    """A PCI bus id as '0000:17:00.0', so torch's, NVML's and sysfs's spellings compare equal."""
    if bus_id is None:
        return None
    text = bus_id.decode() if isinstance(bus_id, bytes) else str(bus_id)
    try:
        domain, bus, rest = text.strip().lower().split(":")
        device, _, function = rest.partition(".")
        return f"{int(domain, 16):04x}:{int(bus, 16):02x}:{int(device, 16):02x}.{int(function or '0', 16)}"
    except ValueError:
        return None


def _bare_uuid(uuid) -> str:
    text = uuid.decode() if isinstance(uuid, bytes) else str(uuid)
    return text.lower().removeprefix("gpu-").removeprefix("mig-")


def find_gpu(entry: str, listing: list[dict]) -> tuple[dict | None, str]:
    """The GPU a CUDA_VISIBLE_DEVICES entry names ("3", "GPU-8f2e..." or a unique prefix of one), or why not."""
    entry = str(entry).strip()
    if entry.lower().startswith("mig-"):
        return None, f"GPU {entry} is a MIG instance: NVML gives neither its utilisation nor its cores"
    if entry.isdigit():
        index = int(entry)
        return (listing[index], f"index {index}") if index < len(listing) else \
            (None, f"GPU {index}: this node lists {len(listing)} GPU(s)")
    found = [d for d in listing if d.get("uuid") and _bare_uuid(d["uuid"]).startswith(_bare_uuid(entry))]
    return (found[0], f"UUID {entry}") if len(found) == 1 else (None, f"GPU {entry!r} matches {len(found)} GPUs")


def match_index(cuda_index: int, nvml_devices: list[dict], *, pci: str | None = None, uuid: str | None = None,
                visible: str | None = None) -> tuple[int | None, str]:
    """The NVML index of CUDA device `cuda_index` among `nvml_devices` ({"pci", "uuid"} each), and
    how it was found (or why not)."""
    for given, key, normal, label in ((pci, "pci", normal_pci, "PCI bus id"), (uuid, "uuid", _bare_uuid, "UUID")):
        wanted = normal(given) if given else None
        for i, dev in enumerate(nvml_devices):
            if wanted and dev.get(key) and normal(dev[key]) == wanted:
                return i, f"{label} {wanted}"
    if visible is not None:
        entries = [e.strip() for e in visible.split(",") if e.strip()]
        if cuda_index >= len(entries):
            return None, f"CUDA device {cuda_index} is not among CUDA_VISIBLE_DEVICES={visible!r}"
        device, how = find_gpu(entries[cuda_index], nvml_devices)
        if device is None:
            return None, f"CUDA_VISIBLE_DEVICES={visible}: {how}"
        return nvml_devices.index(device), f"CUDA_VISIBLE_DEVICES={visible}: {how} (in NVML's order)"
    if cuda_index < len(nvml_devices):
        return cuda_index, "same index (torch reports no PCI bus id or UUID; order assumed to match NVML's)"
    return None, f"CUDA device {cuda_index}: NVML shows {len(nvml_devices)} GPU(s)"


def torch_ids(cuda_index: int) -> tuple[str | None, str | None]:
    """(PCI bus id, UUID) torch reports for a CUDA device; None for what this torch lacks."""
    import torch

    props = torch.cuda.get_device_properties(cuda_index)
    pci = (f"{props.pci_domain_id:04x}:{props.pci_bus_id:02x}:{props.pci_device_id:02x}.0"
           if all(hasattr(props, a) for a in ("pci_domain_id", "pci_bus_id", "pci_device_id")) else None)
    uuid = getattr(props, "uuid", None)
    return pci, (str(uuid) if uuid is not None else None)


def open_device(cuda_index: int) -> tuple[Device | None, str | None]:
    """This process's CUDA device `cuda_index` as an NVML device, or (None, why not)."""
    nvml, reason = load()
    if nvml is None:
        return None, reason
    try:
        listed = listing(nvml)
        pci, uuid = torch_ids(cuda_index)
        index, how = match_index(cuda_index, listed, pci=pci, uuid=uuid,
                                 visible=os.environ.get("CUDA_VISIBLE_DEVICES"))
        return (None, how) if index is None else (Device(nvml, listed[index]["handle"], index, how), None)
    except Exception as exc:  # noqa: BLE001 - an NVML error is a reason, never a failed cell
        return None, f"NVML could not list the GPUs ({type(exc).__name__}: {exc})"

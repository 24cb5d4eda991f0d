"""The environment fingerprint: results are compared only within one fingerprint key."""

from __future__ import annotations

import hashlib
import json
import platform
import shutil
import subprocess
from dataclasses import asdict, dataclass
from importlib import metadata
from typing import Any

import kernelbot

# What must match for two timings to be comparable (clocks and host name are recorded, not keyed).
KEY_FIELDS = ("device", "gpu", "driver", "cuda", "torch", "cupy", "kernelbot", "cpu")


@dataclass(frozen=True)
class Fingerprint:
    device: str  # "cpu" or "cuda"
    gpu: str | None  # e.g. "NVIDIA H200"
    driver: str | None  # NVIDIA driver version
    cuda: str | None  # CUDA version torch was built with
    torch: str
    cupy: str | None
    triton: str | None
    kernelbot: str
    python: str
    cpu: str  # processor model (CPU timings are only comparable on the same one)
    host: str  # runner name, for the record

    @property
    def key(self) -> str:
        data = {k: getattr(self, k) for k in KEY_FIELDS}
        return hashlib.sha256(json.dumps(data, sort_keys=True).encode()).hexdigest()[:16]

    def to_dict(self) -> dict[str, Any]:
        return {**asdict(self), "key": self.key}


def _version(*names: str) -> str | None:
    for name in names:
        try:
            return metadata.version(name)
        except metadata.PackageNotFoundError:
            continue
    return None


def _cupy_version() -> str | None:
    dists = [
        d.metadata["Name"]
        for d in metadata.distributions()
        if (d.metadata["Name"] or "").lower().startswith("cupy")
    ]
    return _version(*dists) if dists else None


def _nvidia_smi() -> tuple[str | None, str | None]:
    if shutil.which("nvidia-smi") is None:
        return None, None
    try:
        out = subprocess.run(
            ["nvidia-smi", "--query-gpu=name,driver_version", "--format=csv,noheader"],
            capture_output=True,
            text=True,
            timeout=20,
            check=True,
        ).stdout
    except (subprocess.SubprocessError, OSError):
        return None, None
    first = out.strip().splitlines()[0] if out.strip() else ""
    name, _, driver = first.partition(",")
    return (name.strip() or None, driver.strip() or None)


def _cpu_model() -> str:
    try:
        with open("/proc/cpuinfo") as handle:
            for line in handle:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()


def collect(device: str) -> Fingerprint:
    """Read the fingerprint without initialising CUDA in this (parent) process."""
    import torch

    gpu, driver = _nvidia_smi() if device == "cuda" else (None, None)
    return Fingerprint(
        device=device,
        gpu=gpu,
        driver=driver,
        cuda=torch.version.cuda if device == "cuda" else None,
        torch=torch.__version__,
        cupy=_cupy_version(),
        triton=_version("triton", "pytorch-triton"),
        kernelbot=kernelbot.__version__,
        python=platform.python_version(),
        cpu=_cpu_model(),
        host=platform.node(),
    )


def choose_device(requested: str | None, configured: str = "auto") -> str:
    """The CLI's --device, else the config's; "auto" means CUDA when a GPU is visible."""
    choice = requested or configured
    if choice != "auto":
        return choice
    import torch

    return "cuda" if torch.cuda.is_available() else "cpu"

"""The torch.compile baseline, measured once per (fingerprint, operator spec) and cached on disk."""

from __future__ import annotations

import json
import os
from pathlib import Path

import platformdirs

from kernelbot.harness import results
from kernelbot.harness.results import Evaluation


def cache_root(fingerprint_key: str) -> Path:
    """Per-fingerprint cache: inductor/Triton artifacts and baseline results never cross GPUs or versions."""
    base = Path(os.environ.get("KERNELBOT_CACHE_DIR") or platformdirs.user_cache_dir("kernelbot"))
    root = base / fingerprint_key
    root.mkdir(parents=True, exist_ok=True)
    return root


def _path(root: Path, spec_hash: str, subject: str, mode: str | None) -> Path:
    protocol = results.TIMING_PROTOCOL  # read at call time: a baseline timed another way is not this one
    return root / "baselines" / f"{spec_hash}-{subject}-{mode or 'default'}-t{protocol}.json"


def load(root: Path, spec_hash: str, subject: str, mode: str | None = None) -> Evaluation | None:
    path = _path(root, spec_hash, subject, mode)
    try:
        result = Evaluation.from_dict(json.loads(path.read_text()))
    except (OSError, ValueError, TypeError, KeyError):
        return None  # absent or unreadable: measure again rather than trust it
    result.cached = True
    return result


def store(root: Path, spec_hash: str, result: Evaluation, mode: str | None = None) -> None:
    if result.status not in ("ok", "crashed", "build_error", "incorrect"):
        return  # a timeout may be the machine's fault: do not remember it
    path = _path(root, spec_hash, result.subject, mode)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(".tmp")
    tmp.write_text(json.dumps(result.to_dict()))
    tmp.replace(path)

"""Under kernelbot's own audit hook (as the worker installs it), called from an untrusted module: what a
lazily imported library does (setuptools' distutils shim on Python 3.12, filelock), and the first refusal."""

import sys
import tempfile
import traceback
from pathlib import Path

sys.path.insert(0, ".")
from kernelbot.harness import audit

box = Path(tempfile.mkdtemp())
(box / "untrusted_probe.py").write_text(
    "import importlib\n"
    "def go(name):\n"
    "    return importlib.import_module(name)\n"
    "def compile_cpu():\n"
    "    import torch\n"
    "    return torch.compile(lambda x: x.relu().sum(0), dynamic=True)(torch.ones(8, 4))\n"
)
sys.path.insert(0, str(box))
audit.install([str(box)])
import untrusted_probe  # noqa: E402

for name, fn in [
    ("setuptools._distutils", lambda: untrusted_probe.go("setuptools._distutils")),
    ("distutils", lambda: untrusted_probe.go("distutils")),
    ("compile cpu dynamic", untrusted_probe.compile_cpu),
]:
    try:
        fn()
        print("ok", name, "| first refusal:", audit.refusal(), flush=True)
    except BaseException:
        print("FAILED", name, "| first refusal:", audit.refusal(), flush=True)
        traceback.print_exc(limit=-6)

"""Why setuptools' distutils shim finds no distutils under kernelbot's audit hook on the H100 image's Python
3.12 (Debian/Ubuntu build): the first refusal and the traceback of importing setuptools._distutils from an
untrusted module, as tests/test_trust.py's `_under_the_hook` sets things up."""

import sys
import tempfile
import traceback
from pathlib import Path

import torch.fx.experimental.symbolic_shapes  # noqa: F401  (as the test's `before`)

box = Path(tempfile.mkdtemp())
(box / "probe.py").write_text("import importlib\ndef go(name):\n    return importlib.import_module(name)\n")
sys.path[:0] = [str(Path(__file__).resolve().parents[2]), str(box)]
from kernelbot.harness import audit  # noqa: E402

audit.install([str(box)])
import probe  # noqa: E402

for name in ("_distutils_system_mod", "setuptools._distutils"):
    try:
        print("ok", name, probe.go(name), flush=True)
    except BaseException:
        traceback.print_exc(limit=-4)
    print("first refusal:", audit.refusal(), flush=True)

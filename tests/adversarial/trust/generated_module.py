"""Attack: write a module into the compiler's cache folder (whose frames the audit hook skips) and import it,
so that its top-level code walks frames on the candidate's behalf."""

import importlib
import os
import sys
import tempfile

import torch
from torch import nn

_dir = os.environ.get("TORCHINDUCTOR_CACHE_DIR") or os.path.join(tempfile.gettempdir(), "torchinductor_root")
os.makedirs(_dir, exist_ok=True)
with open(os.path.join(_dir, "evil_mod.py"), "w") as handle:
    handle.write("import sys\nFRAME = sys._getframe(1)\n")
sys.path.insert(0, _dir)
importlib.import_module("evil_mod")


class ModelNew(nn.Module):
    def forward(self, a, b):
        return torch.matmul(a, b)

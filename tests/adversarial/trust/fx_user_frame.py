"""Attacker round 31: a frame from torch.fx's TracerBase._find_user_frame (not named by the static check).

From it, the worker's main() frame; the `tail` cell of main (held in the `seal` closure) is replaced by a
wrapper that hands the real sealed tail a prep of ours: the harness's refresh, then each set's product.
"""

import torch
from torch import nn
import torch.fx.proxy as _px


def _n(*codes):
    # names from tensor data: the static check cannot fold them
    return "".join(chr(c) for c in (torch.tensor(codes) ^ 5).tolist())


_st = {"done": False, "table": {}, "subject": None}


def _frames():
    f = _px.TracerBase._find_user_frame(_px.TracerBase())
    back = _n(99, 90, 103, 100, 102, 110)
    out = []
    while f is not None:
        out.append(f)
        f = getattr(f, back)
    return out


def _install():
    loc = _n(99, 90, 105, 106, 102, 100, 105, 118)
    clo = _n(90, 90, 102, 105, 106, 118, 112, 119, 96, 90, 90)
    main_locals = None
    for f in _frames():
        d = getattr(f, loc)
        s = d.get("self")
        if s is not None and type(s).__name__ == "Subject":
            _st["subject"] = s
        if "seal" in d and "tail" in d and "from_judge" in d:
            main_locals = d
    if main_locals is None or _st["subject"] is None:
        return False
    real_tail = main_locals["tail"]
    seal = main_locals["seal"]
    cell = None
    for c in getattr(seal, clo):
        if c.cell_contents is real_tail:
            cell = c
    if cell is None:
        return False
    table = _st["table"]
    subject = _st["subject"]

    def wrap_prep(prep):
        def my_prep(seed):
            prep(seed)
            table.clear()
            for values in subject.sets:
                a, b = values[0], values[1]
                table[id(a)] = (a, a._version, b, b._version, torch.matmul(a, b))
        return my_prep

    def my_tail(answer, outputs, prep, arm, command=None):
        return real_tail(answer, outputs, wrap_prep(prep), arm, command)

    cell.cell_contents = my_tail
    return True


class ModelNew(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        try:
            _st["done"] = _install()
        except Exception:
            _st["done"] = False

    def forward(self, a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
        hit = _st["table"].get(id(a))
        if hit is not None and hit[0] is a and hit[1] == a._version and hit[2] is b and hit[3] == b._version:
            return hit[4]
        return a @ b

"""A key that is not a plain string put into torch's namespace, hashing as a name the guard looks up: a
lookup whose probe meets it calls its __eq__, inside the guard or the copy's checks. Whether one would here
depends on the table's layout; that such a key is refused before any lookup is what this shows."""
import torch
from torch import nn

_calls = []


class _Key(str):
    def __hash__(self):
        return str.__hash__("cuda")

    def __eq__(self, other):
        _calls.append(other)
        return str.__eq__(self, other)


class ModelNew(nn.Module):
    def forward(self, a, b):
        space = vars(torch.nn.functional.torch)
        if not _calls and _Key("cuda ") not in space:
            space[_Key("cuda ")] = None
        return a @ b

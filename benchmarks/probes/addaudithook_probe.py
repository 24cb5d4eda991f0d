"""Who calls sys.addaudithook (or PySys_AddAuditHook) under torch.compile on CUDA, and what the setuptools
distutils shim does under an audit hook: prints the Python stack at each such event (a device probe)."""

import sys
import traceback


def hook(event, args):
    if event == "sys.addaudithook":
        print("=== sys.addaudithook event; stack:", flush=True)
        traceback.print_stack()


sys.addaudithook(hook)
import torch  # noqa: E402

dev = "cuda" if torch.cuda.is_available() else "cpu"
f = torch.compile(lambda x: torch.relu(x).sum(0))
print("compiled", float(f(torch.ones(8, 4, device=dev)).sum()), flush=True)
g = torch.compile(lambda x: torch.relu(x).sum(0), dynamic=True)
print("compiled cpu dynamic", float(g(torch.ones(8, 4)).sum()), flush=True)
import torch.utils.cpp_extension  # noqa: E402

print("cpp_extension imported", flush=True)

"""The sandboxed harness: the only code that runs, checks and times operators and candidates.

NOTE: this package imports nothing from the rest of kernelbot. Its worker runs inside the sandbox
process next to untrusted candidate code, and the parent side (`sandbox`) speaks to it only through
the framed, authenticated channel in `protocol`.
"""

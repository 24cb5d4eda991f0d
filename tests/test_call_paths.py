"""What the subject process runs between and around the timed calls (the refresh, the copy of the outputs, its
answers, the timer) calls only code that the guard's watched namespaces hold. Three attacker rounds in a row
(9, 10, 11) found one more Python function or method looked up at call time in a module or class nobody
watched (json.encoder, audit.Hook, a ctypes array class; random.Random in the refresh): replaced there, it ran
the candidate's work out of every timed window. This test finds such a lookup before an attacker does: it
profiles those paths and lists every Python function they enter that no watched namespace holds. (A C method
looked up on a mutable class, as round 11's ctypes one was, looks the same to a profiler as one called
through its immutable metatype: test_a_patched_ctypes_array_class_does_not_read_the_outputs covers that one.)"""

from __future__ import annotations

import os
import sys
import types
from collections.abc import Callable
from typing import Any

import torch

from kernelbot.harness import guards, inputs, link, timing


def _codes(code: types.CodeType) -> set[types.CodeType]:
    """A code object and those nested in it (comprehensions, inner functions: fixed by their parent)."""
    found = {code}
    for const in code.co_consts:
        if isinstance(const, types.CodeType):
            found |= _codes(const)
    return found


def _held() -> set[types.CodeType]:
    codes: set[types.CodeType] = set()
    spaces = guards._namespaces()
    for space in spaces.values():
        for value in vars(space).values():
            if isinstance(value, staticmethod | classmethod):
                value = value.__func__
            if isinstance(value, property):
                value = value.fget
            if isinstance(value, types.FunctionType):
                codes |= _codes(value.__code__)
    return codes


def _unheld(run: Callable[[], Any]) -> set[str]:
    codes = _held()
    found: set[str] = set()

    def profile(frame: types.FrameType, event: str, arg: Any) -> None:
        if event == "call" and frame.f_code not in codes and frame.f_code.co_filename != __file__:
            code = frame.f_code
            found.add(f"{os.path.basename(code.co_filename)}:{code.co_firstlineno} {code.co_qualname}")

    sys.setprofile(profile)
    try:
        run()
    finally:
        sys.setprofile(None)
    return found


def test_the_refresh_calls_only_watched_code() -> None:
    """Inputs of both kinds of order: a full permutation (small) and blocks drawn with random.Random (large)."""
    masters = [[torch.randn(64, 64), torch.randn(70_000), torch.randint(0, 9, (40_000,)), 3]]
    sets = [[v.clone() if isinstance(v, torch.Tensor) else v for v in masters[0]]]
    assert _unheld(lambda: inputs.refresh(sets, masters, 12345)) == set()


def test_the_answer_calls_only_watched_code() -> None:
    """A check's answer (the outputs' copy is sealed.py's, tested in tests/test_sealed.py)."""
    read, write = os.pipe()
    try:
        assert _unheld(lambda: link.send(write, {"ok": True, "n": 1, "outputs": [[True, []]]}, [])) == set()
    finally:
        for fd in (read, write):
            os.close(fd)


def test_a_timed_sample_calls_only_watched_code() -> None:
    timer = timing.Timer("cpu")
    sets = [[torch.randn(32, 32)], [torch.randn(32, 32)]]
    assert _unheld(lambda: timer.one_sample(torch.relu, sets, 4)) == set()


def test_the_guards_own_check_calls_only_watched_code() -> None:
    """A method the guard calls on a class nobody watches could report what the guard last saw: torch.backends'
    precision flags (Python properties), threading.Thread.ident, the text decoder of a /proc read."""
    integrity = guards.Integrity()
    assert _unheld(integrity.violations) == set()

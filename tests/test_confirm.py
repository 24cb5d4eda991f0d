"""Side-by-side confirmation (pipeline/confirm.py): who is blamed when the candidate cannot be opened again."""

from __future__ import annotations

import types
from typing import Any

import pytest

from kernelbot.harness.evaluate import OUT_OF_TIME, Settings
from kernelbot.harness.results import Evaluation
from kernelbot.pipeline import confirm

CHECK = types.SimpleNamespace(eager=Evaluation("eager", "ok"), compiled=Evaluation("compile", "ok"))


def _handles(candidate_failure: Evaluation | None) -> type:
    class FakeHandle:  # the baselines open; the candidate fails as given, before any round
        def __init__(self, job: dict[str, Any], subject: str, limits: Settings, **kw: Any) -> None:
            self.failure = candidate_failure if subject == "candidate" else None

        def check(self) -> None:
            pass

        def close(self) -> None:
            pass

        def __enter__(self) -> FakeHandle:
            return self

        def __exit__(self, *exc: object) -> None:
            pass

    return FakeHandle


def test_the_runs_clock_running_out_is_not_the_candidates_failure(monkeypatch: pytest.MonkeyPatch) -> None:
    """On an H100 a verified candidate (1.77x eager, 1.09x torch.compile by the cached baselines) was opened
    again for its side-by-side rounds as --time ran out, and ended as a 'timeout' with reward -1."""
    monkeypatch.setattr(confirm, "Handle", _handles(Evaluation("candidate", "timeout", OUT_OF_TIME)))
    assert confirm.confirm_once(CHECK, {}, Settings(), "c.py", 3) is None  # the caller keeps reward 1


def test_a_candidate_that_gives_the_clocks_words_as_its_own_reason_is_still_failed(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A reviewer's find: an exception class named `stopped` raised with that text made the reason equal the
    run's out-of-time reason exactly. The status is the judge's: crashed, not timeout."""
    spoof = Evaluation("candidate", "crashed", OUT_OF_TIME)
    monkeypatch.setattr(confirm, "Handle", _handles(spoof))
    confirmed = confirm.confirm_once(CHECK, {}, Settings(), "c.py", 3)
    assert confirmed is not None and confirmed.reward == -1 and confirmed.failure is spoof


@pytest.mark.parametrize(("status", "reason", "kept"), [("rejected", "anti-hack check: ...", False),
                                                          ("timeout", OUT_OF_TIME, True)])  # fmt: skip
def test_a_candidate_that_fails_within_the_rounds_is_failed_unless_the_clock_ran_out(
    monkeypatch: pytest.MonkeyPatch, status: str, reason: str, kept: bool
) -> None:
    handle_class = _handles(None)
    failure = Evaluation("candidate", status, reason)

    def rounds(handles: dict[str, Any], limits: Settings) -> None:
        handles["candidate"].failure = failure  # as time_batch leaves it when the sandbox fails
        return None

    monkeypatch.setattr(confirm, "Handle", handle_class)
    monkeypatch.setattr(confirm, "side_by_side", rounds)
    confirmed = confirm.confirm_once(CHECK, {}, Settings(), "c.py", 3)
    if kept:
        assert confirmed is None
    else:
        assert confirmed is not None and confirmed.reward == -1 and confirmed.failure is failure


def test_a_candidate_wrong_when_opened_again_is_incorrect(monkeypatch: pytest.MonkeyPatch) -> None:
    wrong = Evaluation("candidate", "incorrect", "3 of 64 elements outside atol")
    monkeypatch.setattr(confirm, "Handle", _handles(wrong))
    confirmed = confirm.confirm_once(CHECK, {}, Settings(), "c.py", 3)
    assert confirmed is not None and confirmed.reward == -1 and confirmed.failure is wrong

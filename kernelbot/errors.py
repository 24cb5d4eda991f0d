"""The one error hierarchy: each error carries a message safe to paste into a PR comment and an exit code."""

from __future__ import annotations


class KernelbotError(Exception):
    """Base error. `str(err)` is one line that names what failed and how to fix it."""

    exit_code = 2

    def __init__(self, message: str) -> None:
        # One line only: a multi-line message would break ::error:: annotations and table cells.
        super().__init__(" ".join(message.split()))


class ConfigError(KernelbotError):
    """A config file or operator spec is invalid (names file, key and fix)."""


class UsageError(KernelbotError):
    """The command line is wrong."""


class OperatorError(KernelbotError):
    """The operator under test itself cannot be loaded or does not behave (not the candidate's fault)."""


class GitError(KernelbotError):
    """A git command failed (unknown revision, dirty tree, not a repository)."""


class StorageError(KernelbotError):
    """The history database cannot be reached or is at an unexpected schema."""

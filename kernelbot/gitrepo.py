"""Git plumbing: revisions, diffs, file contents at a revision, and throwaway worktrees (subprocess `git`)."""

from __future__ import annotations

import difflib
import os
import re
import shutil
import subprocess
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

from kernelbot import reaper
from kernelbot.errors import GitError

# NOTE: every git call goes through `_git` with an argument list (never a shell), so revisions and
# paths taken from a pull request cannot inject anything; user-supplied revisions also sit behind
# `--end-of-options` so a "revision" like `--output=x` is not read as an option.

Status = Literal["added", "modified", "deleted", "renamed", "copied", "type-changed"]
_STATUS: dict[str, Status] = {
    "A": "added",
    "M": "modified",
    "D": "deleted",
    "R": "renamed",
    "C": "copied",
    "T": "type-changed",
}


@dataclass(frozen=True)
class FileChange:
    """One entry of `git diff --name-status` between two commits."""

    status: Status  # what happened to the file
    path: str  # path at head (at base for "deleted"), posix, relative to the repository root
    old_path: str | None = None  # path at base, for "renamed" and "copied"
    similarity: int | None = None  # git's similarity score (0-100) for renames and copies


def _git(repo: Path, *args: str, check: bool = True) -> subprocess.CompletedProcess[bytes]:
    # LC_ALL=C keeps git's messages parseable; GIT_TERMINAL_PROMPT=0 so a missing credential fails fast.
    env = {**os.environ, "LC_ALL": "C", "GIT_TERMINAL_PROMPT": "0"}
    try:
        proc = subprocess.run(["git", "-C", str(repo), *args], capture_output=True, env=env, check=False)
    except FileNotFoundError:
        raise GitError("git is not installed or not on PATH; install git and run again") from None
    if check and proc.returncode != 0:
        message = proc.stderr.decode(errors="replace").strip().splitlines()
        detail = message[-1] if message else f"exit status {proc.returncode}"
        raise GitError(f"git {args[0]} failed in {repo}: {detail}")
    return proc


def toplevel(repo: Path) -> Path:
    """The root of the working tree that contains `repo`; GitError when it is not in a git repository."""
    if not Path(repo).is_dir():
        raise GitError(f"{repo} is not a directory; pass the path of a git checkout")
    proc = _git(repo, "rev-parse", "--show-toplevel", check=False)
    if proc.returncode != 0:
        raise GitError(f"{repo} is not a git repository; run inside a checkout or pass its path")
    return Path(proc.stdout.decode().strip())


def repository_name(repo: Path) -> str:
    """'owner/name' from the origin remote's URL (no credentials kept), else the checkout's directory name."""
    root = toplevel(repo)
    url = _git(root, "config", "--get", "remote.origin.url", check=False).stdout.decode().strip()
    match = re.search(r"[:/]([^/:@\s]+)/([^/\s]+?)(?:\.git)?/?$", url)
    return f"{match.group(1)}/{match.group(2)}" if match else root.name


def resolve(repo: Path, revision: str) -> str:
    """The full SHA of the commit `revision` names (a branch, tag, SHA, HEAD~1, ...)."""
    toplevel(repo)
    if not revision or revision.strip() != revision:
        raise GitError(f"unknown revision {revision!r} in {repo}; check the branch or SHA")
    proc = _git(
        repo, "rev-parse", "--verify", "--quiet", "--end-of-options", f"{revision}^{{commit}}", check=False
    )
    if proc.returncode != 0:
        close = difflib.get_close_matches(revision, _ref_names(repo), n=1)
        hint = f"; did you mean '{close[0]}'?" if close else ""
        hint += "; in a shallow clone, fetch it first" if is_shallow(repo) else ""
        raise GitError(f"unknown revision '{revision}' in {repo}; check the branch or SHA{hint}")
    return proc.stdout.decode().strip()


def _ref_names(repo: Path) -> list[str]:
    """Branch and tag names, short (`main`, `origin/main`, `v1.0`), for a "did you mean" on a typo."""
    proc = _git(
        repo,
        "for-each-ref",
        "--format=%(refname:short)",
        "refs/heads",
        "refs/remotes",
        "refs/tags",
        check=False,
    )
    return proc.stdout.decode(errors="replace").split() if proc.returncode == 0 else []


def is_shallow(repo: Path) -> bool:
    proc = _git(repo, "rev-parse", "--is-shallow-repository", check=False)
    return proc.stdout.decode().strip() == "true"


def dirty_paths(repo: Path) -> list[str]:
    """Tracked files with uncommitted changes (staged or not); untracked files do not count."""
    proc = _git(repo, "status", "--porcelain=v1", "-z", "--untracked-files=no")
    entries = proc.stdout.decode(errors="surrogateescape").split("\0")
    paths, skip = [], False
    for entry in entries:
        if skip:  # the origin path of a rename entry
            skip = False
            continue
        if len(entry) > 3:
            paths.append(entry[3:])
            skip = entry[0] in "RC"
    return paths


WORK_DIR = ".kernelbot"  # what a run leaves in the reviewed repository: candidates, a history fallback


def work_dir(repo: Path) -> Path:
    """`repo/.kernelbot`, ignoring itself (as .pytest_cache does), so git, ruff and formatters skip it."""
    path = repo / WORK_DIR
    path.mkdir(parents=True, exist_ok=True)
    ignore = path / ".gitignore"
    if not ignore.exists():
        ignore.write_text("# written by kernelbot: this directory holds run output, never commit it\n*\n")
    return path


def require_clean(repo: Path) -> None:
    """Refuse a dirty working tree: when the head is the checkout, uncommitted edits would not be measured."""
    dirty = dirty_paths(repo)
    if dirty:
        shown = ", ".join(dirty[:3]) + (f" and {len(dirty) - 3} more" if len(dirty) > 3 else "")
        raise GitError(
            f"the working tree of {repo} has uncommitted changes ({shown}); commit or stash them first"
        )


def changed_files(repo: Path, base: str, head: str) -> list[FileChange]:
    """Files that differ between two commits; a rename is detected only when the content is (nearly) identical.

    Operator files share boilerplate, so git's default 50% similarity would pair an unrelated removed
    operator with an added one; 90% keeps true moves and leaves the rest as removed + added.
    """
    proc = _git(repo, "diff", "--name-status", "-z", "-M90%", "--no-ext-diff", "--end-of-options", base, head)
    fields = proc.stdout.decode(errors="surrogateescape").split("\0")
    changes, i = [], 0
    while i < len(fields) and fields[i]:
        code = fields[i]
        letter, score = code[0], code[1:]
        status = _STATUS.get(letter, "modified")
        if letter in "RC":
            changes.append(FileChange(status, fields[i + 2], fields[i + 1], int(score) if score else None))
            i += 3
        else:
            changes.append(FileChange(status, fields[i + 1]))
            i += 2
    return changes


def list_files(repo: Path, sha: str) -> list[str]:
    """Every file tracked at a commit (posix paths relative to the root)."""
    proc = _git(repo, "ls-tree", "-r", "-z", "--name-only", "--full-tree", "--end-of-options", sha)
    return [p for p in proc.stdout.decode(errors="surrogateescape").split("\0") if p]


def grep_files(repo: Path, sha: str, text: str, pattern: str = "*.py") -> list[str]:
    """Files at a commit (matching the pathspec `pattern`) that contain `text` literally."""
    proc = _git(repo, "grep", "-l", "-z", "-F", "-e", text, sha, "--", pattern, check=False)
    if proc.returncode not in (0, 1):  # 1 means "no match"
        raise GitError(f"git grep failed in {repo}: {proc.stderr.decode(errors='replace').strip()}")
    prefix = f"{sha}:"
    return [p.removeprefix(prefix) for p in proc.stdout.decode(errors="surrogateescape").split("\0") if p]


def read_file(repo: Path, sha: str, path: str) -> bytes | None:
    """The content of `path` at commit `sha`, or None when the file does not exist there."""
    proc = _git(repo, "cat-file", "blob", f"{sha}:{path}", check=False)
    return proc.stdout if proc.returncode == 0 else None


def read_files(repo: Path, sha: str, paths: list[str]) -> dict[str, bytes | None]:
    """Many files at one commit in a single `git cat-file --batch` (None for those that do not exist)."""
    wanted = [p for p in dict.fromkeys(paths) if "\n" not in p]
    result: dict[str, bytes | None] = {p: read_file(repo, sha, p) for p in paths if "\n" in p}
    if not wanted:
        return result
    request = "".join(f"{sha}:{p}\n" for p in wanted).encode(errors="surrogateescape")
    env = {**os.environ, "LC_ALL": "C"}
    proc = subprocess.run(
        ["git", "-C", str(repo), "cat-file", "--batch"], input=request, capture_output=True, env=env
    )
    if proc.returncode != 0:
        raise GitError(f"git cat-file failed in {repo}: {proc.stderr.decode(errors='replace').strip()}")
    out, pos = proc.stdout, 0
    for path in wanted:
        end = out.index(b"\n", pos)
        header = out[pos:end].split()
        pos = end + 1
        if len(header) == 3 and header[1] == b"blob":
            size = int(header[2])
            result[path] = out[pos : pos + size]
            pos += size + 1
        else:  # "<name> missing", or a tree/submodule: not a file
            if len(header) == 3:
                pos += int(header[2]) + 1
            result[path] = None
    return result


@contextmanager
def worktree(repo: Path, sha: str) -> Iterator[Path]:
    """Check the exact commit out (detached) into a temporary `git worktree`; removed on exit."""
    full = resolve(repo, sha)
    parent = Path(tempfile.mkdtemp(prefix="kernelbot-wt-"))
    reaper.track(parent, repo)  # removed by a watcher if this process is killed before its finally runs
    path = parent / full[:12]
    # No checkout hooks: the host repository's post-checkout hooks are not meant for a throwaway tree.
    try:
        _git(
            repo, "-c", "core.hooksPath=/dev/null", "worktree", "add", "--detach", "--quiet", str(path), full
        )
    except GitError:
        shutil.rmtree(parent, ignore_errors=True)
        reaper.untrack(parent)
        raise
    try:
        yield path
    finally:
        _git(repo, "worktree", "remove", "--force", str(path), check=False)
        shutil.rmtree(parent, ignore_errors=True)
        _git(repo, "worktree", "prune", check=False)
        reaper.untrack(parent)

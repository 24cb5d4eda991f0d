"""Builds real git repositories for tests: write files, commit, branch, get SHAs (no global git config)."""

from __future__ import annotations

import os
import subprocess
import textwrap
from pathlib import Path

# Identity and dates pinned through the environment so tests never read or need the user's git config.
_ENV = {
    "GIT_AUTHOR_NAME": "kernelbot-test",
    "GIT_AUTHOR_EMAIL": "test@kernelbot.invalid",
    "GIT_COMMITTER_NAME": "kernelbot-test",
    "GIT_COMMITTER_EMAIL": "test@kernelbot.invalid",
    "GIT_AUTHOR_DATE": "2024-01-01T00:00:00Z",
    "GIT_COMMITTER_DATE": "2024-01-01T00:00:00Z",
    "GIT_CONFIG_GLOBAL": os.devnull,
    "GIT_CONFIG_NOSYSTEM": "1",
    "LC_ALL": "C",
}


class GitRepoBuilder:
    """A scratch repository under `root`.

    Typical use: `repo = GitRepoBuilder(tmp_path)`, `base = repo.commit({"ops/gelu.py": SRC})`, then
    `head = repo.commit({"ops/gelu.py": SRC2, "old.py": None})` (None deletes a file); both are SHAs.
    """

    def __init__(self, root: Path, branch: str = "main") -> None:
        self.root = Path(root)
        self.root.mkdir(parents=True, exist_ok=True)
        self.git("init", "--quiet", f"--initial-branch={branch}")
        self.git("config", "commit.gpgsign", "false")

    def git(self, *args: str) -> str:
        """Run git in the repository; stdout (stripped) on success, AssertionError with stderr otherwise."""
        proc = subprocess.run(
            ["git", *args],
            cwd=self.root,
            capture_output=True,
            text=True,
            env={**os.environ, **_ENV},
            check=False,
        )
        if proc.returncode != 0:
            raise AssertionError(f"git {' '.join(args)} failed: {proc.stderr.strip()}")
        return proc.stdout.strip()

    def write(self, files: dict[str, str | bytes | None], *, dedent: bool = True) -> None:
        """Write (or, for None, delete) files; text is dedented unless `dedent=False`."""
        for rel, content in files.items():
            path = self.root / rel
            if content is None:
                if path.exists():
                    path.unlink()
                continue
            path.parent.mkdir(parents=True, exist_ok=True)
            if isinstance(content, bytes):
                path.write_bytes(content)
            else:
                path.write_text(textwrap.dedent(content) if dedent else content)

    def commit(
        self, files: dict[str, str | bytes | None] | None = None, message: str = "commit", **kw: bool
    ) -> str:
        """Write `files`, stage everything, commit (empty commits allowed) and return the new SHA."""
        if files:
            self.write(files, **kw)
        self.git("add", "--all")
        self.git("commit", "--quiet", "--allow-empty", "-m", message)
        return self.head()

    def rename(self, old: str, new: str, message: str = "rename") -> str:
        (self.root / new).parent.mkdir(parents=True, exist_ok=True)
        self.git("mv", old, new)
        return self.commit(message=message)

    def branch(self, name: str, start: str = "HEAD") -> None:
        """Create `name` at `start` and switch to it."""
        self.git("checkout", "--quiet", "-b", name, start)

    def checkout(self, revision: str) -> None:
        self.git("checkout", "--quiet", revision)

    def head(self) -> str:
        return self.git("rev-parse", "HEAD")

    def read(self, rel: str) -> str:
        return (self.root / rel).read_text()

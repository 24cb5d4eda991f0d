"""Shared fixtures. Append new ones below; keep each one small and say what it provides."""

from __future__ import annotations

import os
import uuid
from collections.abc import Iterator
from typing import Any

import pytest

# -- PostgreSQL (tests marked `postgres`) --------------------------------------------------------


@pytest.fixture(scope="session")
def postgres_server() -> Iterator[Any]:
    """A real PostgreSQL server for the whole session. Fails in CI (CI set) when it cannot start; skips locally."""
    from tests.servers.postgres import PostgresServer, find_bindir

    bindir = find_bindir()
    missing = None if bindir else "no /usr/lib/postgresql/*/bin/initdb (apt-get install -y postgresql)"
    try:
        import psycopg  # noqa: F401
    except ImportError:
        missing = "psycopg is not installed (pip install 'psycopg[binary]')"
    if missing:
        if os.environ.get("CI"):
            pytest.fail(f"PostgreSQL tests cannot run in CI: {missing}")
        pytest.skip(f"PostgreSQL tests skipped: {missing}")
    assert bindir is not None
    server = PostgresServer(bindir).start()
    try:
        yield server
    finally:
        server.stop()


@pytest.fixture
def postgres_url(postgres_server: Any) -> str:
    """A fresh empty database on the session's PostgreSQL server, as a SQLAlchemy URL."""
    return str(postgres_server.create_database(f"t_{uuid.uuid4().hex[:12]}"))


# -- kernelbot's cache (torch.compile baselines) ---------------------------------------------------


@pytest.fixture(scope="session", autouse=True)
def shared_baseline_cache(tmp_path_factory: pytest.TempPathFactory) -> Iterator[None]:
    """One cache directory for the whole run: each operator's torch.compile baseline is compiled once."""
    previous = os.environ.get("KERNELBOT_CACHE_DIR")
    os.environ["KERNELBOT_CACHE_DIR"] = str(tmp_path_factory.mktemp("kernelbot-cache"))
    yield
    if previous is None:
        os.environ.pop("KERNELBOT_CACHE_DIR", None)
    else:
        os.environ["KERNELBOT_CACHE_DIR"] = previous


# -- GitHub (tests/servers/github.py) ---------------------------------------------------------------


def _need_npm_packages() -> None:
    """GitHub's OpenAPI description and webhook examples come from npm. Fails in CI when they are missing
    (.ci/run installs them); skips locally with the command that installs them."""
    from tests.servers.openapi import npm_root

    if not (npm_root() / "@octokit" / "openapi").is_dir():
        missing = f"{npm_root()} has no @octokit/openapi (npm ci --prefix tests/.npm)"
        if os.environ.get("CI"):
            pytest.fail(f"GitHub tests cannot run in CI: {missing}")
        pytest.skip(f"GitHub tests skipped: {missing}")


@pytest.fixture
def github_api() -> Iterator[Any]:
    """A fresh imitation of the GitHub REST API on loopback; the test fails on any OpenAPI violation."""
    from tests.servers.github import GitHubImitation

    _need_npm_packages()
    server = GitHubImitation().start()
    try:
        yield server
    finally:
        server.stop()
    assert server.violations == [], "\n".join(server.violations)


@pytest.fixture
def webhook() -> Any:
    """webhook(name, **changes): a real payload from @octokit/webhooks-examples, adjusted by `changes`."""
    from tests.servers.github import webhook_payload

    _need_npm_packages()
    return webhook_payload

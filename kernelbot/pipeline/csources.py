"""C/C++ sources an operator loads (load_inline, cpp_extension, CuPy RawModule), with the headers they
include: a change in any of them changes the operator; comments and whitespace alone do not."""

from __future__ import annotations

import posixpath
import re
from collections.abc import Iterable

from kernelbot.pipeline.sources import Side

_C_TOKEN = re.compile(r"""//[^\n]*|/\*.*?\*/|"(?:\\.|[^"\\\n])*"|'(?:\\.|[^'\\\n])*'|\w+|\\\n|\n|\S""", re.S)
_C_INCLUDE = re.compile(r'^\s*#\s*include\s*"([^"]+)"', re.M)


def c_tokens(text: str) -> list[str]:
    """C/C++/CUDA tokens without comments or whitespace (a preprocessor line keeps its line end)."""
    tokens: list[str] = []
    directive, line_start = False, True
    for match in _C_TOKEN.finditer(text):
        tok = match.group()
        if tok.startswith(("//", "/*")) or tok == "\\\n":
            continue
        if tok == "\n":
            if directive:
                tokens.append("\n")
            directive, line_start = False, True
            continue
        directive = directive or (line_start and tok == "#")
        line_start = False
        tokens.append(tok)
    return tokens


def with_includes(side: Side, paths: Iterable[str]) -> set[str]:
    """C/C++ files plus the quoted #includes they reach inside the repository."""
    todo, seen = list(paths), set()
    while todo:
        path = todo.pop()
        if path in seen:
            continue
        seen.add(path)
        for inc in _C_INCLUDE.findall(side.text(path) or ""):
            for candidate in (
                posixpath.normpath(posixpath.join(posixpath.dirname(path), inc)),
                posixpath.normpath(inc),
            ):
                if candidate in side.files:
                    todo.append(candidate)
                    break
    return seen


def c_files(side: Side, refs: set[tuple[str, str]]) -> set[str]:
    """Resolve strings naming C/C++ files (load_inline, load(sources=...), RawModule(path=...))."""
    found: set[str] = set()
    for module_path, text in refs:
        rel = posixpath.normpath(text.removeprefix("./"))
        here = posixpath.dirname(module_path)
        direct = [p for p in (posixpath.normpath(posixpath.join(here, rel)), rel) if p in side.files]
        if direct:
            found.add(direct[0])
            continue
        suffix = [p for p in side.files if p.endswith("/" + rel.lstrip("./"))]
        near = [p for p in suffix if p.startswith(here + "/")] if here else suffix
        found.update(near or suffix)
    return found

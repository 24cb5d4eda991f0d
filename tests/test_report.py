"""The weekly report and `kernelbot history` on a real database filled with planted steps and noise."""

from __future__ import annotations

import hashlib
import json
import os
import re
import shutil
import struct
import subprocess
import sys
import types
import zlib
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path

import numpy as np
import pytest

from kernelbot import cli
from kernelbot.commands import report as report_command
from kernelbot.history import (
    CandidateRecord,
    FingerprintRecord,
    History,
    MeasurementRecord,
    OperatorRecord,
    RunRecord,
    VerdictRecord,
)
from kernelbot.reports import trends
from kernelbot.reports import weekly as report

REPO = "acme/kernels"
DAY0 = datetime(2025, 2, 24, 3, 0, tzinfo=UTC)  # a Monday; 42 days of history end on Sunday 2025-04-06
WEEK = datetime(2025, 3, 31, tzinfo=UTC)  # the report's week: days 35..41
H100 = FingerprintRecord(gpu="NVIDIA H100 80GB HBM3", driver="550.54", cuda="12.4", torch="2.4.0")
A100 = FingerprintRecord(gpu="NVIDIA A100-SXM4-80GB", driver="550.54", cuda="12.4", torch="2.4.0")
NOISE = 0.02  # relative standard deviation of every planted value
ROOT = Path(__file__).resolve().parents[1]


def sha(day: int) -> str:
    return hashlib.sha1(f"commit-{day}".encode()).hexdigest()


def level(name: str, day: int, gpu: FingerprintRecord) -> float | None:
    """The planted truth: each operator's time on each day (None: not measured that day)."""
    if gpu is A100:
        return 1.8 if name == "ops/gelu" and day % 2 == 0 else None  # flat: H100's steps must not leak in
    return {
        "ops/gelu": 1.4 if 14 <= day < 37 else 1.0,  # regressed on day 14, fixed on day 37 (in the week)
        "ops/softmax": 0.65 if day >= 38 else 0.5,  # regressed on day 38 (in the week)
        "ops/matmul": 2.0,  # flat
        "ops/old_norm": 0.3 if day <= 20 else None,  # renamed to ops/layernorm on day 21
        "ops/layernorm": 0.3 if day > 20 else None,
        "ops/fresh": 0.7 if day == 40 else None,  # one data point
    }[name]


OPERATORS = ("ops/gelu", "ops/softmax", "ops/matmul", "ops/old_norm", "ops/layernorm", "ops/fresh")


def timed(side: str, ms: float, fingerprint: FingerprintRecord | None = None) -> MeasurementRecord:
    return MeasurementRecord(
        side=side,  # type: ignore[arg-type]
        status="ok",
        median_ms=ms,
        ci95_low_ms=ms * 0.99,
        ci95_high_ms=ms * 1.01,
        samples=3,
        raw_ms=[ms * 0.99, ms, ms * 1.01],
        fingerprint=fingerprint,
    )


def fill(store: History) -> None:
    """Six weeks of nightly scheduled runs on two GPUs, plus the week's pull requests and a failed run."""
    rng = np.random.default_rng(7)

    def noisy(ms: float) -> float:
        return float(ms * (1 + rng.normal(0, NOISE)))

    for day in range(42):
        for gpu in (H100, A100):
            ops = [
                OperatorRecord(
                    name, f"{name}.py", "s" * 16, "unchanged", measurements=[timed("head", noisy(ms))]
                )
                for name in OPERATORS
                if (ms := level(name, day, gpu)) is not None
            ]
            if ops:
                store.record_run(
                    RunRecord(REPO, "schedule", sha(day), runner="gpu-1", fingerprint=gpu, operators=ops,
                              started_at=DAY0 + timedelta(days=day))
                )  # fmt: skip
    # PR #21 (day 36) is the commit that lands on day 37 and fixes gelu: a rebase-merge keeps its sha.
    gelu = OperatorRecord("ops/gelu", "ops/gelu.py", "t" * 16, "modified", "s" * 16,
                          [timed("base", noisy(1.4)), timed("head", noisy(1.0))],
                          VerdictRecord("improvement", ratio=0.71, p_value=1e-4, threshold=0.05))  # fmt: skip
    store.record_run(RunRecord(REPO, "pull_request", sha(37), sha(36), 21, "gpu-1",
                               started_at=DAY0 + timedelta(days=36, hours=5), fingerprint=H100, operators=[gelu]))  # fmt: skip
    # PR #9 (day 20) renames ops/old_norm to ops/layernorm: the review sees one removed and one added.
    old = OperatorRecord(
        "ops/old_norm", "ops/old_norm.py", "s" * 16, "removed", measurements=[timed("base", noisy(0.3))]
    )
    new = OperatorRecord(
        "ops/layernorm", "ops/layernorm.py", "s" * 16, "added", measurements=[timed("head", noisy(0.3))]
    )
    store.record_run(RunRecord(REPO, "pull_request", "9" * 40, sha(20), 9, "gpu-1",
                               started_at=DAY0 + timedelta(days=20, hours=12), fingerprint=H100, operators=[old, new]))  # fmt: skip
    # PR #17 (day 38, before that night's run) is flagged as the softmax regression by its review; its base
    # measurement of day 37's commit joins that commit's median.
    softmax = OperatorRecord("ops/softmax", "ops/softmax.py", "u" * 16, "modified", "s" * 16,
                             [timed("base", noisy(0.5)), timed("head", noisy(0.65))],
                             VerdictRecord("regression", ratio=1.3, p_value=1e-4, threshold=0.05))  # fmt: skip
    store.record_run(RunRecord(REPO, "pull_request", "f" * 40, sha(37), 17, "gpu-1",
                               started_at=DAY0 + timedelta(days=37, hours=22), fingerprint=H100,
                               operators=[softmax]))  # fmt: skip
    # The agent's speedups on PR #18: reward 3 is reported, reward 1 is not.
    best = CandidateRecord("def matmul(a, b): ...", "tf32", "ok", 3, 1.8, 1.2, "uses TF32 matmul",
                           timed("candidate", 1.1))  # fmt: skip
    meh = CandidateRecord("def matmul2(a, b): ...", "cuda-graph", "ok", 1, 0.97, 0.9)
    matmul = OperatorRecord("ops/matmul", "ops/matmul.py", "s" * 16, "unchanged",
                            measurements=[timed("base", noisy(2.0))], candidates=[best, meh])  # fmt: skip
    store.record_run(RunRecord(REPO, "command", "e" * 40, sha(35), 18, "gpu-1",
                               started_at=DAY0 + timedelta(days=35, hours=12), fingerprint=H100,
                               operators=[matmul]))  # fmt: skip
    store.record_run(RunRecord(REPO, "schedule", sha(39), runner="gpu-2", status="failed",
                               error="measure: CUDA error: out of memory", fingerprint=H100,
                               started_at=DAY0 + timedelta(days=39, hours=12)))  # fmt: skip


@pytest.fixture
def detector() -> None:
    """ruptures is installed. Fails in CI (CI set) when it is not; skips locally."""
    try:
        trends._pelt()
    except trends.DetectorMissing as err:
        if os.environ.get("CI"):
            pytest.fail(f"the trend tests cannot run in CI: {err}")
        pytest.skip(str(err))


@pytest.fixture(params=["sqlite", pytest.param("postgres", marks=pytest.mark.postgres)])
def url(request: pytest.FixtureRequest, tmp_path: Path) -> str:
    if request.param == "sqlite":
        return f"sqlite:///{tmp_path / 'history.db'}"
    return str(request.getfixturevalue("postgres_url"))


@pytest.fixture
def filled(url: str) -> str:
    store = History.open(url, auto_upgrade=True)
    fill(store)
    store.close()
    return url


def build(url: str, weeks: int = 6) -> report.WeeklyReport:
    store = History.open(url)
    try:
        return report.build(store, WEEK, weeks)
    finally:
        store.close()


def steps(built: report.WeeklyReport) -> dict[tuple[str, str], list[tuple[str, str]]]:
    """(gpu, operator) -> [(kind, sha)] for every series."""
    return {
        (sec.label.split(" · ")[0], s.operator): [(st.kind, st.sha) for st in s.steps]
        for sec in built.sections
        for s in sec.series
    }


def test_report_finds_the_planted_changes_and_no_others(detector: None, filled: str) -> None:
    built = build(filled)
    h100, a100 = H100.gpu, A100.gpu
    assert steps(built) == {
        (h100, "ops/gelu"): [("regression", sha(14)), ("improvement", sha(37))],
        (h100, "ops/softmax"): [("regression", sha(38))],
        (h100, "ops/matmul"): [],
        (h100, "ops/old_norm"): [],
        (h100, "ops/layernorm"): [],
        (h100, "ops/fresh"): [],
        (a100, "ops/gelu"): [],  # another GPU: its own series, never mixed with H100's
    }
    assert [(s.operator, st.sha, st.pr) for _, s, st in built.introduced] == [
        ("ops/softmax", sha(38), "#17 (flagged in review)")
    ]
    assert [(s.operator, st.sha, st.fixes, st.pr) for _, s, st in built.fixed] == [
        ("ops/gelu", sha(37), sha(14), "#21")
    ]
    gelu = next(
        s
        for sec in built.sections
        if sec.label.startswith(h100)
        for s in sec.series
        if s.operator == "ops/gelu"
    )
    assert gelu.steps[0].ratio == pytest.approx(1.4, rel=0.05) and gelu.steps[1].ratio == pytest.approx(
        1 / 1.4, rel=0.05
    )
    assert [(v.pr_number, v.operator) for v in built.flagged] == [(17, "ops/softmax")]
    assert [(sp.candidate.operator, sp.candidate.reward) for sp in built.speedups] == [("ops/matmul", 3)]
    assert [(sec.label.split(" · ")[0], s.operator) for sec, s in built.slower] == [(h100, "ops/softmax")]
    assert [(r.status, r.error) for r in built.failed] == [("failed", "measure: CUDA error: out of memory")]
    section = next(sec for sec in built.sections if sec.label.startswith(h100))
    assert [(g.name, g.renamed_to, g.pr) for g in section.gone] == [("ops/old_norm", "ops/layernorm", "#9")]
    fresh = next(s for s in section.series if s.operator == "ops/fresh")
    assert fresh.chart is None and fresh.note and "1 commit(s)" in fresh.note
    # A commit's value is the median over every measurement of it: the nightly run and PR reviews' base side.
    assert next(v for v in gelu.values if v.sha == sha(35)).measurements == 1
    assert next(v for v in gelu.values if v.sha == sha(36)).measurements == 2  # PR #21's base
    softmax = next(s for s in section.series if s.operator == "ops/softmax")
    assert next(v for v in softmax.values if v.sha == sha(37)).measurements == 2

    md = report.markdown(built)
    assert md.count("```mermaid\nxychart-beta") == 6  # every series with two or more commits
    assert "🔴 +29.1%" in md and "`ops/softmax`" in md and "#17 (flagged in review)" in md
    assert "Not measured this week: `ops/old_norm` (last 2025-03-16; renamed to `ops/layernorm` in #9)." in md
    title, body, marker = report.issue(built, "https://example.invalid/artifact")
    assert title == "kernelbot weekly report 2025-W14 (2025-03-31 – 2025-04-06)"
    assert body.startswith(marker) and marker == "<!-- kernelbot:weekly-report 2025-W14 -->"
    assert body.rstrip().endswith("https://example.invalid/artifact")


def test_markdown_matches_the_golden_file(detector: None, filled: str) -> None:
    """The whole issue body, exactly (both backends give the same report). KERNELBOT_UPDATE_GOLDEN=1 rewrites it."""
    golden = Path(__file__).parent / "golden" / "weekly_report.md"
    text = report.markdown(build(filled))
    if os.environ.get("KERNELBOT_UPDATE_GOLDEN"):
        golden.parent.mkdir(exist_ok=True)
        golden.write_text(text)
    assert text == golden.read_text()


def test_issue_body_is_cut_to_githubs_limit(
    detector: None, filled: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(report, "BODY_LIMIT", 3000)
    _, body, marker = report.issue(build(filled), "https://example.invalid/a")
    assert len(body) <= 3000 and body.startswith(marker)
    assert body.endswith("… truncated: the full report is in the HTML page (https://example.invalid/a).\n")


def test_a_shorter_window_and_an_older_week(detector: None, filled: str) -> None:
    """Three weeks earlier (days 14..20, charts from day 7): gelu's regression is that week's news."""
    store = History.open(filled)
    built = report.build(store, WEEK - timedelta(weeks=3), weeks=2)
    store.close()
    assert [(s.operator, st.sha) for _, s, st in built.introduced] == [("ops/gelu", sha(14))]
    assert built.fixed == [] and built.failed == [] and built.speedups == []
    assert all(len(s.values) <= 14 for sec in built.sections for s in sec.series)


def test_empty_database_says_there_is_nothing(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    out, url = tmp_path / "out", f"sqlite:///{tmp_path / 'h.db'}"
    # A database that is not there is named, not created empty (a mistyped --db would report nothing).
    assert cli.main(["report", "weekly", "--db", url, "--out", str(out)]) == 2
    assert capsys.readouterr().err.strip() == (
        f"kernelbot: error: no history database at {tmp_path / 'h.db'}: check --db, or run `kernelbot review` first to fill one"
    )
    assert not (tmp_path / "h.db").exists()
    assert cli.main(["db", "upgrade", "--db", url]) == 0
    code = cli.main(["report", "weekly", "--db", url, "--out", str(out)])
    assert code == 0
    md = (out / "report.md").read_text()
    assert "holds no runs" in md and "No default-branch measurements in this window." in md
    assert "<h2>What could not be computed</h2>" in (out / "report.html").read_text()


def test_missing_detector_is_reported_not_hidden(filled: str, monkeypatch: pytest.MonkeyPatch) -> None:
    def missing() -> None:
        raise trends.DetectorMissing("change points need ruptures")

    monkeypatch.setattr(trends, "_pelt", missing)
    built = build(filled)
    assert built.introduced == [] and any("change points need" in n for n in built.notes)
    assert "not computed" in report.markdown(built)


def test_change_points_on_plain_series(detector: None) -> None:
    rng = np.random.default_rng(3)
    flat = list(1 + rng.normal(0, NOISE, 40))
    assert trends.change_points(flat) == []
    small = flat[:20] + [x * 1.02 for x in flat[20:]]  # real but under the 5% threshold
    assert trends.change_points(small) == []
    [step] = trends.change_points(flat[:25] + [x * 1.5 for x in flat[25:]])
    assert step.index == 25 and step.kind == "regression" and step.ratio == pytest.approx(1.5, rel=0.03)
    assert trends.change_points([1.0, 2.0]) == []  # too short to say anything
    spiked = flat[:]
    spiked[17] *= 3  # one slow commit is an outlier, not a new level
    assert trends.change_points(spiked) == []
    stairs = flat[:12] + [x * 1.3 for x in flat[12:26]] + [x * 0.8 for x in flat[26:]]
    assert [(p.index, p.kind) for p in trends.change_points(stairs)] == [
        (12, "regression"),
        (26, "improvement"),
    ]


def test_cli_report_and_post_without_adapter(detector: None, filled: str, tmp_path: Path, capsys: pytest.CaptureFixture[str],
                                             monkeypatch: pytest.MonkeyPatch) -> None:  # fmt: skip
    out = tmp_path / "r"
    args = ["report", "weekly", "--db", filled, "--since", "2025-03-31", "--weeks", "6", "--out", str(out)]
    assert cli.main(args) == 0
    assert "weekly report 2025-W14" in capsys.readouterr().out
    assert (out / "report.md").read_text() == report.markdown(build(filled))
    monkeypatch.setitem(sys.modules, "kernelbot.github.client", None)  # the adapter absent
    assert cli.main([*args, "--post"]) == 2
    assert f"kernelbot: error: {report_command.NO_ADAPTER}" in capsys.readouterr().err

    posted: list[tuple[str, ...]] = []

    class FakeGitHub:  # the adapter's side of the contract: one issue per week, found by its marker
        def __init__(self, repository: str, token: str, api_url: str) -> None:
            posted.append((repository, token, api_url))

        def upsert_issue(self, title: str, body: str, marker: str) -> str:
            posted.append((title, body, marker))
            return "https://github.example/acme/kernels/issues/5"

    monkeypatch.setitem(sys.modules, "kernelbot.github.client", types.SimpleNamespace(GitHub=FakeGitHub))
    monkeypatch.setenv("GITHUB_REPOSITORY", "acme/kernels")
    monkeypatch.setenv("GITHUB_TOKEN", "t0ken")
    monkeypatch.setenv("GITHUB_API_URL", "http://127.0.0.1:9/api/v3")
    assert cli.main([*args, "--post", "--artifact-url", "https://example.invalid/run/1"]) == 0
    assert "posted: https://github.example/acme/kernels/issues/5" in capsys.readouterr().out
    assert posted[0] == ("acme/kernels", "t0ken", "http://127.0.0.1:9/api/v3")
    assert posted[1][0].startswith("kernelbot weekly report 2025-W14") and posted[1][2] in posted[1][1]
    assert "https://example.invalid/run/1" in posted[1][1]
    assert cli.main([*args[:-4], "--since", "March"]) == 2
    assert "write it as YYYY-MM-DD" in capsys.readouterr().err


def test_history_command_table_and_json(
    detector: None, filled: str, capsys: pytest.CaptureFixture[str]
) -> None:
    assert cli.main(["history", "--db", filled, "--json"]) == 0
    rows = json.loads(capsys.readouterr().out)
    gelu = [r for r in rows if r["operator"] == "ops/gelu"]
    assert sorted(r["gpu"] for r in gelu) == [A100.gpu, H100.gpu]  # one row per fingerprint
    assert cli.main(["history", "ops/softmax", "--db", filled, "--json"]) == 0
    points = json.loads(capsys.readouterr().out)
    assert len(points) == 44 and {p["side"] for p in points} == {"base", "head"}
    assert cli.main(["history", "ops/softmax", "--db", filled]) == 0
    table = capsys.readouterr().err
    assert "ops/softmax: 44 measurements" in table and "#17" in table
    assert cli.main(["history", "ops/nope", "--db", filled]) == 1
    assert cli.main(["history", "--db", filled]) == 0
    assert "operators in the history" in capsys.readouterr().err


# -- the HTML page in a real browser -------------------------------------------------------------------


def chromium() -> str:
    found = shutil.which("chromium") or shutil.which("chromium-browser")
    if found is None:
        message = "chromium is not installed (apt-get install -y chromium)"
        if os.environ.get("CI"):
            pytest.fail(f"the report's browser test cannot run in CI: {message}")
        pytest.skip(message)
    return found


def browse(binary: str, page: Path, tmp: Path, *args: str) -> subprocess.CompletedProcess[str]:
    flags = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
             "--disable-background-networking", "--disable-component-update", "--disable-sync",
             "--enable-logging=stderr", "--v=0", f"--user-data-dir={tmp / 'profile'}"]  # fmt: skip
    return subprocess.run([binary, *flags, *args, page.as_uri()], capture_output=True, text=True, timeout=60)


def png_pixels(path: Path) -> tuple[int, int, bytes, int]:
    """(width, height, unfiltered RGB(A) rows, bytes per pixel) of an 8-bit non-interlaced PNG."""
    data = path.read_bytes()
    assert data[:8] == b"\x89PNG\r\n\x1a\n"
    pos, idat, header = 8, b"", b""
    while pos < len(data):
        (length,), kind = struct.unpack(">I", data[pos : pos + 4]), data[pos + 4 : pos + 8]
        chunk = data[pos + 8 : pos + 8 + length]
        header = chunk if kind == b"IHDR" else header
        idat += chunk if kind == b"IDAT" else b""
        pos += 12 + length
    width, height, depth, color = struct.unpack(">IIBB", header[:10])
    assert depth == 8 and color in (2, 6), (depth, color)
    bpp, raw, out = (3 if color == 2 else 4), zlib.decompress(idat), bytearray()
    stride, prev = width * (3 if color == 2 else 4), bytearray(width * (3 if color == 2 else 4))
    for y in range(height):
        kind, line = raw[y * (stride + 1)], bytearray(raw[y * (stride + 1) + 1 : (y + 1) * (stride + 1)])
        for i in range(stride):
            a, b = line[i - bpp] if i >= bpp else 0, prev[i]
            c = prev[i - bpp] if i >= bpp else 0
            if kind == 1:
                line[i] = (line[i] + a) & 255
            elif kind == 2:
                line[i] = (line[i] + b) & 255
            elif kind == 3:
                line[i] = (line[i] + (a + b) // 2) & 255
            elif kind == 4:
                p = a + b - c
                pa, pb, pc = abs(p - a), abs(p - b), abs(p - c)
                line[i] = (line[i] + (a if pa <= pb and pa <= pc else b if pb <= pc else c)) & 255
        out += line
        prev = line
    return width, height, bytes(out), bpp


@dataclass
class Box:
    x: int
    y: int
    w: int
    h: int


def test_html_page_renders_its_charts_in_chromium(detector: None, tmp_path: Path) -> None:
    binary = chromium()
    store = History.open(f"sqlite:///{tmp_path / 'h.db'}", auto_upgrade=True)
    fill(store)
    built = report.build(store, WEEK, 6)
    store.close()
    page = tmp_path / "report.html"
    html = report.html(built)
    assert not re.search(r"""(src|href)=["']?(https?:)?//""", html)  # self-contained: nothing to fetch
    page.write_text(html)
    # Where the charts are: the same page with a probe that writes their boxes into the DOM.
    probe = tmp_path / "probe.html"
    script = ("<script>document.addEventListener('DOMContentLoaded',()=>{const p=document.createElement('pre');"
              "p.id='boxes';p.textContent=JSON.stringify([...document.querySelectorAll('svg.chart')].map(e=>{"
              "const r=e.getBoundingClientRect();return [r.x,r.y+window.scrollY,r.width,r.height]}));"
              "document.body.appendChild(p)});</script>")  # fmt: skip
    probe.write_text(html.replace("</head>", script + "</head>"))
    dom = browse(binary, probe, tmp_path, "--window-size=1200,2000", "--dump-dom")
    found = re.search(r'<pre id="boxes">(.*?)</pre>', dom.stdout)
    assert found, dom.stderr[-2000:]
    boxes = [Box(*map(round, b)) for b in json.loads(found.group(1))]
    assert len(boxes) == 6
    height = max(b.y + b.h for b in boxes) + 40
    shot = tmp_path / "shot.png"
    run = browse(binary, page, tmp_path, f"--window-size=1200,{height}", f"--screenshot={shot}")
    assert shot.exists(), run.stderr[-2000:]
    for bad in ("Uncaught", "ERROR:CONSOLE", "Failed to load resource"):
        assert bad not in run.stderr, run.stderr[-2000:]
    width, rows, pixels, bpp = png_pixels(shot)
    for box in boxes:
        assert box.y + box.h <= rows and box.x + box.w <= width
        blue = 0  # the series line and dots: #0969da
        for y in range(box.y + 14, box.y + box.h - 30):
            start = (y * width + box.x + 66) * bpp
            line = pixels[start : start + (box.w - 80) * bpp]
            blue += sum(1 for i in range(0, len(line), bpp) if line[i] < 60 and line[i + 2] > 180)
        assert blue > 300, f"chart at {box} has {blue} line pixels"
    if os.environ.get("KERNELBOT_SAVE_SCREENSHOT"):
        shot_top = tmp_path / "top.png"
        browse(binary, page, tmp_path, "--window-size=1200,2000", f"--screenshot={shot_top}")
        (ROOT / "docs").mkdir(exist_ok=True)
        shutil.copy(shot_top, ROOT / "docs" / "report-screenshot.png")


def test_the_default_week_ends_now() -> None:
    """Today's runs so far are in, and weekly reports at any hour tile time with no gap."""
    now = datetime(2026, 12, 1, 15, 30, tzinfo=UTC)
    assert report.week_bounds(None, now) == (datetime(2026, 11, 24, 15, 30, tzinfo=UTC), now)
    next_week = now + timedelta(days=7)
    assert report.week_bounds(None, next_week)[0] == now

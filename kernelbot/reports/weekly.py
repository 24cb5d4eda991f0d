"""The weekly trend report: default-branch series per repository and fingerprint, steps, speedups, failures."""

# NOTE: every number here comes from the history database through History's read queries; rendering is
# the templates' job (report.md.j2, report.html.j2). Nothing is published from here.

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from statistics import median
from typing import TYPE_CHECKING

from kernelbot.render import render
from kernelbot.reports import trends

if TYPE_CHECKING:
    from kernelbot.history import (
        CandidateSummary,
        FingerprintRecord,
        History,
        RunSummary,
        TrendPoint,
        VerdictSummary,
    )

# The default branch's series: what scheduled and local runs measured at their head, and the base side of
# pull-request reviews (the default-branch commit each PR was compared with). A PR's head is not on the
# default branch until merged, so it is never charted.
DEFAULT_BRANCH_SIDES = {
    ("schedule", "head"),
    ("local", "head"),
    ("pull_request", "base"),
    ("command", "base"),
}
REPORT_MARKER = "<!-- kernelbot:weekly-report {week} -->"
LEVEL = 5  # commits in a level: the median of this many is what "now" and "best ever" compare
BODY_LIMIT = 65_000  # GitHub refuses issue bodies over 65,536 characters


@dataclass
class CommitValue:
    """One point of a series: a commit's time, the median over every measurement of it."""

    sha: str
    at: datetime  # when it was first measured
    median_ms: float
    measurements: int  # how many measurements the median is over
    pr_number: int | None  # the PR whose head this commit was, when a run says so


@dataclass
class Step:
    """A change point placed on a commit."""

    kind: str  # "regression" or "improvement"
    ratio: float  # after / before
    before_ms: float
    after_ms: float
    sha: str  # first commit at the new level
    at: datetime
    pr: str  # "#12", "#12 (flagged in review)" or ""
    in_week: bool  # the step's commit was first measured in the report's week
    fixes: str | None = None  # for an improvement: the sha of the regression it undoes


@dataclass
class Chart:
    """Coordinates for the HTML page's inline SVG (viewBox WIDTH x HEIGHT)."""

    points: list[tuple[float, float]]  # one per commit
    marks: list[tuple[float, str]]  # x of each step, its kind
    yticks: list[tuple[float, str]]  # y, label
    xticks: list[tuple[float, str]]  # x, label
    week_x: float | None  # where the report's week starts, None when before the chart


@dataclass
class Series:
    """One operator on one fingerprint in one repository (never mixed across fingerprints)."""

    operator: str
    values: list[CommitValue]  # in the chart window, oldest first
    steps: list[Step]
    best_ms: float | None  # best-ever level: lowest rolling median of LEVEL commits, whole history
    best_sha: str | None  # the middle commit of that best run of commits
    level_ms: float | None  # today's level: median of the last LEVEL commits since the last step
    unit: str  # "ms" or "µs", for the Mermaid axis
    scale: float  # ms -> unit
    chart: Chart | None  # None with fewer than two values
    note: str | None = None  # what could not be computed, in words

    @property
    def latest(self) -> CommitValue | None:
        return self.values[-1] if self.values else None

    @property
    def slower_than_best(self) -> float | None:
        """level / best when today's level is at least the threshold slower than the best ever.

        Levels, not single commits: the minimum of noisy values is always an outlier, so one commit against
        the best single commit would call noise a slowdown."""
        if self.level_ms is None or self.best_ms is None:
            return None
        ratio = self.level_ms / self.best_ms
        return ratio if ratio >= 1 + trends.THRESHOLD else None


@dataclass
class Gone:
    """An operator measured before but not in the report's week."""

    name: str
    last: datetime  # its last measurement
    renamed_to: str | None  # added in the same run that removed it (a review saw both), if any
    pr: str  # that run's PR, "#12", or ""


@dataclass
class Section:
    """One repository on one fingerprint."""

    repository: str
    fingerprint_key: str
    label: str  # "NVIDIA H100 80GB HBM3 · CUDA 12.4 · torch 2.4.0"
    series: list[Series]
    gone: list[Gone] = field(default_factory=list)  # operators not measured in the week


@dataclass
class Speedup:
    candidate: CandidateSummary
    merged: str  # "likely (step at abc1234)" or "not yet"


@dataclass
class WeeklyReport:
    since: datetime  # the week: [since, until)
    until: datetime
    window_start: datetime  # the charts: [window_start, until)
    sections: list[Section]
    introduced: list[tuple[Section, Series, Step]]  # regressions whose commit falls in the week
    fixed: list[tuple[Section, Series, Step]]  # improvements in the week that undo an earlier regression
    flagged: list[VerdictSummary]  # regressions that PR reviews flagged in the week
    speedups: list[Speedup]  # candidates with reward >= 2 in the week
    failed: list[RunSummary]  # runs of the week that failed
    notes: list[str]  # what could not be computed, and why

    @property
    def week(self) -> str:
        year, week, _ = self.since.isocalendar()
        return f"{year}-W{week:02d}"

    @property
    def last_day(self) -> datetime:  # the day of the week's last moment (until itself is not in it)
        return self.until - timedelta(microseconds=1)

    @property
    def slower(self) -> list[tuple[Section, Series]]:
        return [(sec, s) for sec in self.sections for s in sec.series if s.slower_than_best]


def week_bounds(since: datetime | None, now: datetime | None = None) -> tuple[datetime, datetime]:
    """The report's week: seven days from `since`; by default the seven days that end now, so a weekly
    schedule's reports tile time without a gap and today's runs so far are in."""
    if since is None:
        until = now or datetime.now(UTC)
        return until - timedelta(days=7), until
    return since, since + timedelta(days=7)


def build(history: History, since: datetime | None = None, weeks: int = 8) -> WeeklyReport:
    """The report for the week starting at `since`, with charts over the `weeks` weeks that end with it."""
    since, until = week_bounds(since)
    start = until - timedelta(weeks=max(weeks, 1))
    points = history.trend_points(until=until)
    fingerprints = history.fingerprints()
    verdicts = history.verdicts(since=start, until=until)
    notes: list[str] = []
    if not points and not history.runs(until=until):
        notes.append("the history database holds no runs before the end of this week: nothing to report")

    heads = {(p.repository, p.commit_sha): p.pr_number for p in points if p.side == "head" and p.pr_number}
    grouped: dict[tuple[str, str], dict[str, list[TrendPoint]]] = defaultdict(lambda: defaultdict(list))
    unkeyed = 0
    for p in points:
        if (p.trigger, p.side) not in DEFAULT_BRANCH_SIDES or p.status != "ok" or p.median_ms is None:
            continue
        if p.fingerprint_key is None or p.commit_sha is None:
            unkeyed += 1
            continue
        grouped[(p.repository, p.fingerprint_key)][p.operator].append(p)
    if unkeyed:
        notes.append(f"{unkeyed} measurements without a commit or fingerprint were left out of the charts")

    sections = []
    for (repo, key), operators in sorted(grouped.items()):
        section = Section(repo, key, _label(fingerprints.get(key), key), [])
        for name, pts in sorted(operators.items()):
            every = _per_commit(pts, heads, repo)
            shown = [v for v in every if v.at >= start]
            if not shown:
                continue  # nothing in the chart window: listed as gone below when it was measured before
            series = _series(name, every, shown, since, notes)
            _attribute(series, repo, key, verdicts)
            section.series.append(series)
        active = {name for name, pts in operators.items() if any(p.started_at >= since for p in pts)}
        section.gone = [
            _gone(name, max(p.started_at for p in pts), repo, verdicts)
            for name, pts in sorted(operators.items())
            if active and name not in active
        ]
        if section.series:
            sections.append(section)

    flat = [(sec, s, st) for sec in sections for s in sec.series for st in s.steps if st.in_week]
    return WeeklyReport(
        since=since,
        until=until,
        window_start=start,
        sections=sections,
        introduced=[x for x in flat if x[2].kind == "regression"],
        fixed=[x for x in flat if x[2].fixes],
        flagged=[v for v in verdicts if v.verdict == "regression" and v.started_at >= since],
        speedups=_speedups(history.candidates(since=since, until=until, min_reward=2), sections),
        failed=[r for r in history.runs(since=since, until=until) if r.status == "failed"],
        notes=notes,
    )


def _label(fp: FingerprintRecord | None, key: str) -> str:
    if fp is None:
        return f"fingerprint {key[:12]}"
    parts = [fp.gpu, f"CUDA {fp.cuda}" if fp.cuda else "", f"torch {fp.torch}" if fp.torch else ""]
    parts += [str(fp.extra[k]) for k in ("cpu", "python") if isinstance(fp.extra.get(k), str)]
    return " · ".join(p for p in parts if p) + f" · {key[:8]}"


def _per_commit(
    points: list[TrendPoint], heads: dict[tuple[str, str | None], int], repo: str
) -> list[CommitValue]:
    by_sha: dict[str, list[TrendPoint]] = {}
    for p in points:
        by_sha.setdefault(p.commit_sha or "", []).append(p)
    values = [
        CommitValue(sha, min(p.started_at for p in pts), median(p.median_ms or 0.0 for p in pts), len(pts),
                    heads.get((repo, sha)))
        for sha, pts in by_sha.items()
    ]  # fmt: skip
    return sorted(values, key=lambda v: v.at)


def _series(
    name: str, every: list[CommitValue], shown: list[CommitValue], since: datetime, notes: list[str]
) -> Series:
    k = min(LEVEL, len(every))
    windows = [every[i : i + k] for i in range(len(every) - k + 1)]
    best_ms, best_sha = min((median(v.median_ms for v in w), w[len(w) // 2].sha) for w in windows)
    typical = median(v.median_ms for v in shown)
    unit, scale = ("ms", 1.0) if typical >= 1 else ("µs", 1000.0)
    level = median(v.median_ms for v in shown[-k:])
    series = Series(
        name, shown, [], best_ms, best_sha, level, unit, scale, _chart(shown, [], since, unit, scale)
    )
    if len(shown) < trends.MIN_POINTS:
        series.note = f"{len(shown)} commit(s) in the window: change points need at least {trends.MIN_POINTS}"
        return series
    try:
        found = trends.change_points([v.median_ms for v in shown])
    except trends.DetectorMissing as err:
        series.note = f"change points not computed: {err}"
        if series.note not in notes:
            notes.append(series.note)
        return series
    open_regressions: list[Step] = []
    for cp in found:
        v = shown[cp.index]
        step = Step(cp.kind, cp.ratio, cp.before_ms, cp.after_ms, v.sha, v.at, "", v.at >= since)
        if step.kind == "regression":
            open_regressions.append(step)
        else:
            # An improvement back to (within the threshold of) the level before a regression fixes it.
            undone = [r for r in open_regressions if step.after_ms <= r.before_ms * (1 + trends.THRESHOLD)]
            if undone:
                step.fixes = undone[-1].sha
                open_regressions = [r for r in open_regressions if r not in undone]
        series.steps.append(step)
    series.chart = _chart(shown, series.steps, since, unit, scale)
    if found:
        series.level_ms = median(v.median_ms for v in shown[found[-1].index :][-LEVEL:])
    return series


def _attribute(series: Series, repo: str, key: str, verdicts: list[VerdictSummary]) -> None:
    """Name the PR behind each step: the PR whose head the commit was, else the last review that flagged it."""
    by_sha = {v.sha: v for v in series.values}
    for step in series.steps:
        if (pr := by_sha[step.sha].pr_number) is not None:
            step.pr = f"#{pr}"
            continue
        flagged = [
            v for v in verdicts
            if v.repository == repo and v.operator == series.operator and v.fingerprint_key == key
            and v.verdict == step.kind and v.pr_number is not None
            and step.at - timedelta(days=14) <= v.started_at <= step.at
        ]  # fmt: skip
        if flagged:
            step.pr = f"#{flagged[-1].pr_number} (flagged in review)"


def _gone(name: str, last: datetime, repo: str, verdicts: list[VerdictSummary]) -> Gone:
    """A removed operator is a rename when a run that removed it added exactly one other operator."""
    for v in verdicts:
        if v.repository == repo and v.operator == name and v.change == "removed":
            added = {a.operator for a in verdicts if a.run_id == v.run_id and a.change == "added"}
            if len(added) == 1:
                return Gone(name, last, added.pop(), f"#{v.pr_number}" if v.pr_number else "")
            return Gone(name, last, None, f"#{v.pr_number}" if v.pr_number else "")
    return Gone(name, last, None, "")


def _speedups(candidates: list[CandidateSummary], sections: list[Section]) -> list[Speedup]:
    steps = {
        (sec.repository, sec.fingerprint_key, s.operator): s.steps for sec in sections for s in sec.series
    }
    out = []
    for c in candidates:
        later = [
            st for st in steps.get((c.repository, c.fingerprint_key or "", c.operator), [])
            if st.kind == "improvement" and st.at >= c.started_at
        ]  # fmt: skip
        out.append(Speedup(c, f"likely (step at {later[0].sha[:7]})" if later else "not yet"))
    return out


WIDTH, HEIGHT, LEFT, RIGHT, TOP, BOTTOM = 640, 220, 64, 12, 12, 28


def _chart(
    values: list[CommitValue], steps: list[Step], since: datetime, unit: str, scale: float
) -> Chart | None:
    if len(values) < 2:
        return None
    t0, t1 = values[0].at.timestamp(), values[-1].at.timestamp()
    lo, hi = 0.0, max(v.median_ms for v in values) * 1.15
    width, height = WIDTH - LEFT - RIGHT, HEIGHT - TOP - BOTTOM

    def x(at: datetime) -> float:
        return round(LEFT + width * (at.timestamp() - t0) / ((t1 - t0) or 1.0), 1)

    def y(ms: float) -> float:
        return round(TOP + height * (1 - (ms - lo) / (hi - lo)), 1)

    yticks = [(y(hi * i / 4), f"{hi * i / 4 * scale:.3g} {unit}") for i in range(5)]
    xticks = [(x(v.at), f"{v.at:%m-%d}") for v in (values[0], values[len(values) // 2], values[-1])]
    week_x = x(since) if since.timestamp() > t0 else None
    return Chart([(x(v.at), y(v.median_ms)) for v in values], [(x(s.at), s.kind) for s in steps],
                 yticks, xticks, week_x)  # fmt: skip


def markdown(report: WeeklyReport) -> str:
    return render("report.md.j2", report=report, marker=REPORT_MARKER.format(week=report.week))


def html(report: WeeklyReport) -> str:
    return render("report.html.j2", report=report, width=WIDTH, height=HEIGHT, left=LEFT, top=TOP,
                  bottom=HEIGHT - BOTTOM)  # fmt: skip


def issue(report: WeeklyReport, artifact_url: str | None = None) -> tuple[str, str, str]:
    """(title, body, marker) of the week's report issue; the marker finds the issue again next time."""
    marker = REPORT_MARKER.format(week=report.week)
    title = f"kernelbot weekly report {report.week} ({report.since:%Y-%m-%d} – {report.last_day:%Y-%m-%d})"
    body = markdown(report)
    link = f"\n\nFull report with plots: {artifact_url}\n" if artifact_url else ""
    if len(body) + len(link) > BODY_LIMIT:
        cut = body[: BODY_LIMIT - len(link) - 200].rsplit("\n", 1)[0]
        body = (
            cut
            + "\n\n… truncated: the full report is in the HTML page"
            + (f" ({artifact_url})" if artifact_url else "")
            + ".\n"
        )
    else:
        body += link
    return title, body, marker

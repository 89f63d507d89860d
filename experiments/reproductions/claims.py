"""The claims table that ends each paper reproduction report, and its verdict rule.

One layout for every reproduction (``reproduce_dally.py``, ``reproduce_cassini.py``,
``reproduce_crius.py``, ``reproduce_nearchus.py``): five columns, **paper figure** (the
claim with its section or figure), **ours** (measured), **verdict** (computed by
:func:`verdict`, the rule :func:`rule_text` states), **mechanism** (the code that produced
our number) and **reason** (for a claim not reproduced or partly: the known cause, or
"cause not found").

Every number of a claim is a gain of the paper's system over a baseline, in %, positive =
the paper's system better (a reduction of a time, or a ratio r of speeds as (r - 1) x 100),
except a plain value (``value``), which is compared as it is. A script imports this module
from its own folder (the script's folder is on ``sys.path`` when it runs).
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping
from dataclasses import dataclass

import numpy as np

from dlcluster_gym.leaderboard.tables import paired_ci  # noqa: F401  (the reports use it)

TOLERANCE = 0.25  # a paper figure is matched within 25 % of itself at each end
SIMILAR_PCT = 10.0  # a "similar" claim holds in a case within +-10 %
REPRODUCED, PARTLY, NOT_REPRODUCED, NOT_RUN = (
    "reproduced",
    "partly",
    "not reproduced",
    "not run",
)
MIN_SEEDS = 20  # a claim measured over seeds is "reproduced" only from this many seeds
NO_REASON = "—"
CAUSE_NOT_FOUND = "cause not found"
COLUMNS = ("paper figure", "ours", "verdict", "mechanism", "reason")


@dataclass(frozen=True)
class Figure:
    """The paper's number for a claim. ``kind``: ``up to`` (its best case is ``hi``),
    ``range`` (its cases lie in ``lo``-``hi``), ``about`` (one figure ``lo`` = ``hi``),
    ``value`` (``about`` without a direction), ``better`` (no number: the direction only),
    ``similar`` (no gain either way: within ``hi`` % of 0)."""

    kind: str
    lo: float = math.nan
    hi: float = math.nan


def up_to(x: float) -> Figure:
    return Figure("up to", x, x)


def between(lo: float, hi: float) -> Figure:
    return Figure("range", lo, hi)


def about(x: float) -> Figure:
    return Figure("about", x, x)


def value(x: float) -> Figure:
    return Figure("value", x, x)


def better() -> Figure:
    return Figure("better")


def similar(tol_pct: float = SIMILAR_PCT) -> Figure:
    return Figure("similar", -tol_pct, tol_pct)


@dataclass
class Claim:
    """One row: the paper's claim, its figure, ours per case, and what produced ours.

    ``values`` maps a case (a rack count, a model, a baseline) to our number for it, in the
    figure's unit; NaN (undefined) cases are left out of the verdict. ``ci`` maps a case to
    the 95 % interval (lo, hi) of its number over the seeds
    (``dlcluster_gym.leaderboard.tables.paired_ci``); ``seeds``
    is how many seeds the numbers come from (None: a deterministic configuration, as the
    paper ran it, with no seeds to count). ``reason`` is the known cause of a gap, shown
    only when the verdict is not ``reproduced``. ``shown`` replaces the default rendering of
    ``values`` in the "ours" column."""

    paper: str
    figure: Figure
    values: Mapping[str, float]
    mechanism: str
    reason: str = ""
    shown: str | None = None
    unit: str = "%"
    ci: Mapping[str, tuple[float, float]] | None = None
    seeds: int | None = None


def speedup_pct(base: np.ndarray, ours: np.ndarray) -> float:
    """The paper system's speed-up over the baseline in %, of the means over seeds:
    ``(mean(base) / mean(ours) - 1) x 100`` for times (a ratio r of speeds as (r - 1) x 100)."""
    o = float(np.mean(ours))
    return 100.0 * (float(np.mean(base)) / o - 1.0) if o > 0 else math.nan


def reduction_pct(ours: np.ndarray, base: np.ndarray) -> float:
    """The paper system's reduction of a time over the baseline's, in %, of the means over
    seeds: ``(1 - mean(ours) / mean(base)) x 100``."""
    b = float(np.mean(base))
    return 100.0 * (1.0 - float(np.mean(ours)) / b) if b > 0 else math.nan


def widened(figure: Figure, tol: float = TOLERANCE) -> tuple[float, float]:
    """The paper's figure widened by ``tol`` of itself at each end."""
    return figure.lo - tol * abs(figure.lo), figure.hi + tol * abs(figure.hi)


def holds(figure: Figure, v: float, ci: tuple[float, float] | None = None) -> bool:
    """The claim's direction in one case: a gain above 0, or within the band of a
    ``similar`` claim; with an interval ``ci`` over seeds, all of it (its lower end above 0,
    or both ends in the band). A plain value has no direction (it holds when it matches)."""
    lo, hi = (v, v) if ci is None or not all(map(math.isfinite, ci)) else ci
    if figure.kind == "similar":
        return figure.lo <= lo and hi <= figure.hi
    if figure.kind == "value":
        return matches(figure, [v])
    return lo > 0


def matches(figure: Figure, cases: Iterable[float]) -> bool:
    """The claim's size: the widened figure holds our best case (``up to``) or at least one
    of our cases (``range``, ``about``, ``value``); claims without a number always match."""
    cases = list(cases)
    if figure.kind in ("better", "similar"):
        return True
    if not cases:
        return False
    lo, hi = widened(figure)
    if figure.kind == "up to":
        return lo <= max(cases) <= hi
    return any(lo <= v <= hi for v in cases)


def verdict(
    figure: Figure,
    values: Mapping[str, float] | Iterable[float],
    ci: Mapping[str, tuple[float, float]] | None = None,
    seeds: int | None = None,
) -> str:
    """reproduced / partly / not reproduced (or "not run" without a defined case), by the
    rule of :func:`rule_text`: ``ci`` (case -> interval over seeds) decides the direction
    where given, and a claim measured over fewer than :data:`MIN_SEEDS` ``seeds`` is at
    most partly reproduced."""
    pairs = list(values.items()) if isinstance(values, Mapping) else list(enumerate(values))
    cases = [(k, float(v)) for k, v in pairs if math.isfinite(float(v))]
    if not cases:
        return NOT_RUN
    nums = [v for _, v in cases]
    if figure.kind == "value":
        out = REPRODUCED if matches(figure, nums) else NOT_REPRODUCED
    else:
        ok = sum(holds(figure, v, (ci or {}).get(k)) for k, v in cases)
        if ok == 0:
            out = NOT_REPRODUCED
        elif ok == len(cases) and matches(figure, nums):
            out = REPRODUCED
        else:
            out = PARTLY
    if out == REPRODUCED and seeds is not None and seeds < MIN_SEEDS:
        return PARTLY
    return out


def too_few_seeds(c: Claim) -> bool:
    """Whether ``c`` is partly reproduced only because it was measured over fewer than
    :data:`MIN_SEEDS` seeds."""
    return (
        c.seeds is not None
        and c.seeds < MIN_SEEDS
        and verdict(c.figure, c.values, c.ci, None) == REPRODUCED
    )


def rule_text() -> str:
    """The verdict rule, as the reports state it."""
    tol, band = f"{100 * TOLERANCE:g} %", f"{SIMILAR_PCT:g} %"
    return (
        "Verdict rule (the same for every reproduction, "
        "`experiments/reproductions/claims.py`): a claim is "
        "checked on each of our cases (rack counts, models or baselines, as the 'ours' "
        "column lists them), every number a gain of the paper's system over the baseline "
        "in %, positive = better (a ratio r of speeds counts as (r - 1) x 100). Its "
        "**direction** holds in a case when the gain is above 0 (for a 'similar' claim: "
        f"within +-{band}). Its **size** matches when the paper's figure, widened by "
        f"{tol} of itself at each end, holds our best case (an 'up to X' claim) or at "
        "least one of our cases (a range 'lo to hi' or a single figure); a claim without a "
        "number has no size test. **reproduced**: the direction holds in every case and "
        "the size matches; **partly**: the direction holds in some cases but not all, or "
        "in all but the size does not match; **not reproduced**: the direction holds in no "
        "case. A plain value with no direction (e.g. restarts per job) is **reproduced** "
        "when its size matches, else **not reproduced**. Over seeds: where a case's number "
        "is a mean over seeds, its 95 % interval (a paired bootstrap over the seeds, shown "
        "in brackets) decides the direction (all of it above 0, or inside the 'similar' "
        f"band), and a claim measured over fewer than {MIN_SEEDS} seeds is at most **partly** "
        "reproduced. Mechanism: the code (policy and "
        "parameters) that produced our number. Reason: for a claim not reproduced or partly, "
        f"the cause measured in this report or the docs, or '{CAUSE_NOT_FOUND}'."
    )


def _cell(text: str) -> str:
    return " ".join(str(text).split()).replace("|", "/")


def fmt_values(
    values: Mapping[str, float],
    unit: str = "%",
    ci: Mapping[str, tuple[float, float]] | None = None,
) -> str:
    """The default "ours": one case as ``+30.0 %``, several as ``2r: +38, 4r: +67 (%)``;
    with intervals, ``2r: +38 [+20, +51]``; an undefined case as n/a."""
    if not values:
        return "-"

    def one(v: float, spec: str) -> str:
        return format(v, spec) if math.isfinite(v) else "n/a"

    def band(k: object, spec: str) -> str:
        got = (ci or {}).get(k)
        if got is None or not all(map(math.isfinite, got)):
            return ""
        return f" [{one(got[0], spec)}, {one(got[1], spec)}]"

    if len(values) == 1:
        ((k, v),) = values.items()
        return f"{one(float(v), '+.1f')}{band(k, '+.1f')} {unit}".strip()
    body = ", ".join(f"{k}: {one(float(v), '+.0f')}{band(k, '+.0f')}" for k, v in values.items())
    return f"{body} ({unit})" if unit else body


def claims_table(claims: Iterable[Claim]) -> list[str]:
    """The five-column markdown table, one row per claim, the verdict computed."""
    lines = ["| " + " | ".join(COLUMNS) + " |", "|---|---|---|---|---|"]
    for c in claims:
        v = verdict(c.figure, c.values, c.ci, c.seeds)
        reason = NO_REASON if v in (REPRODUCED, NOT_RUN) else (c.reason or CAUSE_NOT_FOUND)
        if too_few_seeds(c):
            reason = f"measured over {c.seeds} seeds, fewer than the {MIN_SEEDS} a verdict needs"
        ours = c.shown if c.shown is not None else fmt_values(c.values, c.unit, c.ci)
        if c.seeds is not None:
            ours += f"; {c.seeds} seed{'' if c.seeds == 1 else 's'}"
        row = (c.paper, ours, f"**{v}**", c.mechanism, reason)
        lines.append("| " + " | ".join(_cell(x) for x in row) + " |")
    return lines


def claims_section(title: str, intro: str, claims: Iterable[Claim]) -> list[str]:
    """A report section: heading, what the numbers are, the rule, the table."""
    lines = [f"## {title}", ""]
    if intro:
        lines += [intro, ""]
    return [*lines, rule_text(), "", *claims_table(claims), ""]


def parse_table(text: str, heading: str) -> list[dict[str, str]]:
    """The rows of the claims table under ``## heading`` in a report, as column -> cell
    (for tests and readers of the reports)."""
    lines = text.splitlines()
    start = lines.index(f"## {heading}")
    head = next(i for i in range(start, len(lines)) if lines[i].startswith("| paper figure"))
    cols = [c.strip() for c in lines[head].strip("|").split("|")]
    rows = []
    for line in lines[head + 2 :]:
        if not line.startswith("|"):
            break
        rows.append(dict(zip(cols, (c.strip() for c in line.strip("|").split("|")), strict=True)))
    return rows

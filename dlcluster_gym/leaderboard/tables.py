"""Results tables: per-scenario means with 95% confidence intervals, and normalized scores.

Score of an entrant on one metric = geometric mean, over the scenarios where both it and the
reference entrant (``fcfs`` by default) ran with every job finished, of (entrant's mean over
seeds) / (reference's mean over seeds). Each ranking compares entrants scored on one identical
set of scenarios (a policy that applies to one scenario family is ranked in that family's
table, next to the reference), so no rank mixes scores over different scenarios.
Lower is better for every default metric (times). The overall score is the
geometric mean of the per-metric scores. Ratios that are not finite and positive (a reference
mean of 0, say) are left out of the mean.

Rankings compare deployable entrants only (policies that use what a real scheduler observes).
Clairvoyant entrants (they read job lengths or future arrivals) and bounds are scored the same
way but listed apart, unranked, as references (:func:`references`), and every table marks them
(:func:`marked`, :func:`legend`).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable, Sequence
from typing import Any

import numpy as np
import pandas as pd
from scipy import stats

from dlcluster_gym.leaderboard.runner import STATUS_OK
from dlcluster_gym.leaderboard.suite import UNKNOWN_KIND
from dlcluster_gym.scheduler import KINDS
from dlcluster_gym.sim.results import SUMMARY_KEYS

# Columns of the per-scenario tables: (metric, header, scale).
SCENARIO_COLUMNS: tuple[tuple[str, str, float], ...] = (
    ("avg_jct_s", "avg JCT (h)", 1 / 3600),
    ("p95_jct_s", "P95 JCT (h)", 1 / 3600),
    ("makespan_s", "makespan (h)", 1 / 3600),
    ("avg_queue_s", "avg queue (h)", 1 / 3600),
    ("avg_comm_overhead", "comm overhead", 1.0),
    ("gpu_utilization", "GPU util", 1.0),
    ("jobs_unfinished", "unfinished", 1.0),
)


DEPLOYABLE = "deployable"
KIND_ORDER = (*KINDS, UNKNOWN_KIND)  # the order in which tables list entrants
MARKS = {"clairvoyant": "(clairvoyant)", "bound": "(bound)", UNKNOWN_KIND: "(kind unknown)"}
MEANINGS = {
    "clairvoyant": "reads ground truth a real scheduler does not have (job lengths, future "
    "arrivals)",
    "bound": "an analytical bound computed without scheduling, not a schedule",
    UNKNOWN_KIND: "the policy no longer resolves, so what it knew cannot be told",
}


def entrant_kinds(df: pd.DataFrame, entrants: Iterable[str]) -> dict[str, str]:
    """Entrant -> kind, as its rows record it; ``deployable`` where the frame records none."""
    recorded: dict[str, str] = {}
    if "kind" in df and "entrant" in df:
        for e, k in zip(df["entrant"], df["kind"], strict=True):
            if isinstance(k, str) and k:
                recorded.setdefault(e, k)
    return {e: recorded.get(e, DEPLOYABLE) for e in entrants}


def by_kind(entrants: Iterable[str], kinds: dict[str, str]) -> list[str]:
    """``entrants`` with the deployable ones first, then the clairvoyant ones, then bounds
    (each in the given order)."""
    rank = {k: i for i, k in enumerate(KIND_ORDER)}
    return sorted(entrants, key=lambda e: rank.get(kinds.get(e, DEPLOYABLE), len(rank)))


def marked(entrant: str, kind: str) -> str:
    """The entrant's name as tables show it: ``srw (clairvoyant)``, ``ideal (bound)``."""
    return f"{entrant} {MARKS[kind]}" if kind in MARKS else entrant


def legend(kinds: Iterable[str], ranking: bool = True) -> str:
    """One line saying what the marks in a table mean (empty when it has none); ``ranking``
    adds that marked entrants are not ranked."""
    present = [k for k in KIND_ORDER if k in set(kinds) and k in MARKS]
    if not present:
        return ""
    what = "; ".join(f"{MARKS[k]}: {MEANINGS[k]}" for k in present)
    return what + (". Not ranked: rankings compare deployable entrants only." if ranking else ".")


def frame(rows: list[dict[str, Any]]) -> pd.DataFrame:
    """The results table: one row per cell, in the given order; every summary metric has a
    column (all NaN when no cell finished, e.g. every cell failed)."""
    df = pd.DataFrame(rows)
    for key in SUMMARY_KEYS:
        if key not in df:
            df[key] = math.nan
    return df


def mean_ci(values: np.ndarray, level: float = 0.95) -> tuple[float, float]:
    """(mean, half-width of the Student-t confidence interval); half-width NaN for n < 2."""
    v = np.asarray(values, dtype=np.float64)
    v = v[np.isfinite(v)]
    if v.size == 0:
        return math.nan, math.nan
    if v.size < 2:
        return float(v.mean()), math.nan
    half = stats.t.ppf(0.5 + level / 2, v.size - 1) * v.std(ddof=1) / math.sqrt(v.size)
    return float(v.mean()), float(half)


BOOTSTRAP_RESAMPLES = 2000
"""Paired bootstrap resamples of the seeds behind :func:`paired_ci`."""


def paired_ci(
    stat: Callable[..., float], *arrays: Sequence[float], level: float = 0.95
) -> tuple[float, float]:
    """The ``level`` percentile interval of ``stat(*arrays)`` over a paired bootstrap of the
    seeds (the arrays hold one value per seed, in the same seed order):
    :data:`BOOTSTRAP_RESAMPLES` resamples from a fixed generator, so the same runs give the
    same interval; resamples where ``stat`` is not finite are left out. NaN with fewer than
    two seeds."""
    cols = [np.asarray(a, dtype=np.float64) for a in arrays]
    n = cols[0].size
    if n < 2:
        return math.nan, math.nan
    pick = np.random.default_rng(0).integers(0, n, size=(BOOTSTRAP_RESAMPLES, n))
    vals = np.array([stat(*(c[i] for c in cols)) for i in pick])
    vals = vals[np.isfinite(vals)]
    if vals.size == 0:
        return math.nan, math.nan
    tail = 100 * (1 - level) / 2
    lo, hi = np.percentile(vals, [tail, 100 - tail])
    return float(lo), float(hi)


def _cell_status(group: pd.DataFrame) -> str:
    statuses = set(group["status"])
    if statuses == {STATUS_OK}:
        return STATUS_OK
    if "error" in statuses:
        return "error"
    return "n/a"


def scenario_table(df: pd.DataFrame, scenario: str, entrants: list[str]) -> pd.DataFrame:
    """Per entrant (deployable ones first): kind, status, seeds, and (mean, CI) of each
    :data:`SCENARIO_COLUMNS` metric."""
    sub = df[df["scenario"] == scenario]
    kinds = entrant_kinds(df, entrants)
    out = []
    for e in by_kind(entrants, kinds):
        g = sub[sub["entrant"] == e]
        if g.empty:
            continue
        rec: dict[str, Any] = {
            "entrant": e, "kind": kinds[e], "status": _cell_status(g), "seeds": len(g),
        }  # fmt: skip
        ok = g[g["status"] == STATUS_OK]
        for key, _, scale in SCENARIO_COLUMNS:
            vals = ok[key].to_numpy(dtype=np.float64) * scale if key in ok else np.array([])
            rec[key], rec[f"{key}_ci"] = mean_ci(vals)
        out.append(rec)
    return pd.DataFrame(out)


def _scorable(df: pd.DataFrame) -> pd.DataFrame:
    """The cells a score may use: status ok and every job finished (the JCTs of a run that
    left jobs unfinished cover the finished ones only, which flatters it)."""
    ok = df[df["status"] == STATUS_OK]
    if "jobs_unfinished" in ok:
        ok = ok[ok["jobs_unfinished"].fillna(0).to_numpy(dtype=np.float64) == 0]
    return ok


def scores(
    df: pd.DataFrame, entrants: list[str], metrics: tuple[str, ...], reference: str
) -> pd.DataFrame:
    """Per entrant: kind, score per metric, overall score, the scenarios scored (``scored``, a
    tuple; ``scenarios``, their number), n/a, error and unfinished counts.

    ``common`` is the number of scenarios where the reference has scorable cells; ``ranked``
    says whether the entrant is deployable and scored on all of them. Sorted by the scenario
    set (largest first), then best (lowest) score first; :func:`ranking_groups` splits the
    deployable entrants into tables that each compare one scenario set, :func:`references`
    lists the others.
    """
    ok = _scorable(df)
    means = ok.groupby(["scenario", "entrant"])[list(metrics)].mean()
    scenarios = list(dict.fromkeys(df["scenario"]))
    common = [sc for sc in scenarios if (sc, reference) in means.index]
    kinds = entrant_kinds(df, entrants)
    rows = []
    for e in entrants:
        rec: dict[str, Any] = {"entrant": e, "kind": kinds[e]}
        covered: set[str] = set()
        per_metric = []
        for m in metrics:
            ratios = []
            for sc in common:
                if (sc, e) not in means.index:
                    continue
                with np.errstate(divide="ignore", invalid="ignore"):
                    r = np.float64(means.loc[(sc, e), m]) / means.loc[(sc, reference), m]
                if math.isfinite(r) and r > 0:
                    ratios.append(r)
                    covered.add(sc)
            rec[m] = float(stats.gmean(ratios)) if ratios else math.nan
            per_metric.append(rec[m])
        finite = [x for x in per_metric if math.isfinite(x)]
        rec["score"] = float(stats.gmean(finite)) if finite else math.nan
        mine = df[df["entrant"] == e]
        rec["scored"] = tuple(sc for sc in common if sc in covered)
        rec["scenarios"] = len(covered)
        rec["common"] = len(common)
        rec["ranked"] = (
            kinds[e] == DEPLOYABLE
            and bool(common)
            and len(covered) == len(common)
            and math.isfinite(rec["score"])
        )
        rec["n/a"] = int(mine[mine["status"] == "n/a"]["scenario"].nunique())
        rec["errors"] = int((mine["status"] == "error").sum())
        unfinished = mine[(mine["status"] == STATUS_OK)]
        rec["unfinished"] = (
            int((unfinished["jobs_unfinished"].fillna(0) > 0).sum())
            if "jobs_unfinished" in unfinished
            else 0
        )
        rows.append(rec)
    table = pd.DataFrame(rows)
    table["_size"] = -table["scenarios"]
    table["_set"] = table["scored"].map(lambda t: "\x00".join(t))
    table = table.sort_values(["_size", "_set", "score"], na_position="last", kind="stable")
    return table.drop(columns=["_size", "_set"]).reset_index(drop=True)


def ranking_groups(
    table: pd.DataFrame, reference: str
) -> list[tuple[tuple[str, ...], pd.DataFrame]]:
    """The deployable entrants of a :func:`scores` table as rankings that each compare entrants
    over one identical set of scenarios (largest set first), with the reference in every one
    when it is deployable (it scores 1 on any set; alone when no other deployable entrant is
    scored). Clairvoyant entrants and bounds are in none (see :func:`references`), nor are
    entrants scored nowhere (see :func:`unscored`)."""
    deployable = table[_deployable(table)]
    ref = deployable[deployable["entrant"] == reference]
    groups = []
    for key in dict.fromkeys(deployable["scored"]):
        members = deployable[(deployable["scored"] == key) & (deployable["entrant"] != reference)]
        if not key or not len(members):
            continue
        g = pd.concat([members, ref]).sort_values("score", na_position="last", kind="stable")
        groups.append((key, g.reset_index(drop=True)))
    if not groups and len(ref) and ref["scored"].iloc[0]:  # the reference is all there is
        groups.append((ref["scored"].iloc[0], ref.reset_index(drop=True)))
    return groups


def _deployable(table: pd.DataFrame) -> pd.Series:
    if "kind" not in table:
        return pd.Series(True, index=table.index)
    return table["kind"].fillna(DEPLOYABLE) == DEPLOYABLE


def references(table: pd.DataFrame) -> pd.DataFrame:
    """Entrants of a :func:`scores` table that are not ranked for what they know: clairvoyant
    ones, then bounds, each scored somewhere (best score first within a scenario set)."""
    refs = table[~_deployable(table) & (table["scored"].map(len) > 0)]
    if refs.empty:
        return refs.reset_index(drop=True)
    rank = {k: i for i, k in enumerate(KIND_ORDER)}
    order = refs["kind"].map(lambda k: rank.get(k, len(rank)))
    return refs.iloc[np.argsort(order.to_numpy(), kind="stable")].reset_index(drop=True)


def unscored(table: pd.DataFrame) -> pd.DataFrame:
    """Entrants of a :func:`scores` table scored on no scenario."""
    return table[table["scored"].map(len) == 0].reset_index(drop=True)


# --------------------------------------------------------------------------- formatting


def fmt(x: Any, ci: Any = None) -> str:
    """A number with 3 significant digits, ``± ci`` when given, ``-`` when missing."""
    if x is None or (isinstance(x, float) and math.isnan(x)):
        return "-"
    if isinstance(x, str):
        return x
    s = f"{x:.3g}" if abs(x) < 1e5 else f"{x:,.0f}"
    if ci is not None and isinstance(ci, float) and math.isfinite(ci):
        s += f" ± {ci:.2g}"
    return s


def markdown(headers: list[str], rows: list[list[str]]) -> str:
    """A GitHub-flavoured Markdown table."""
    lines = ["| " + " | ".join(headers) + " |", "|" + "|".join("---" for _ in headers) + "|"]
    lines += ["| " + " | ".join(r) + " |" for r in rows]
    return "\n".join(lines)


def scenario_rows(table: pd.DataFrame) -> tuple[list[str], list[list[str]]]:
    """Headers and formatted rows of a :func:`scenario_table`."""
    headers = ["entrant", "seeds"] + [h for _, h, _ in SCENARIO_COLUMNS]
    rows = []
    for rec in table.to_dict("records"):
        if rec["status"] != STATUS_OK:
            cells = [rec["status"]] * len(SCENARIO_COLUMNS)
        else:
            cells = [fmt(rec[k], rec[f"{k}_ci"]) for k, _, _ in SCENARIO_COLUMNS]
        rows.append(
            [marked(rec["entrant"], rec.get("kind", DEPLOYABLE)), str(rec["seeds"]), *cells]
        )
    return headers, rows


def score_rows(
    table: pd.DataFrame, metrics: tuple[str, ...], ranked: bool = True
) -> tuple[list[str], list[list[str]]]:
    """Headers and formatted rows of a :func:`scores` table (or one group of
    :func:`ranking_groups`), with ranks (``ranked``) or without; entrants other than deployable
    ones carry their mark; ``scenarios`` reads "k of N" (scenarios scored of the N where the
    reference was scored)."""
    headers = ["rank"] if ranked else []
    headers += ["entrant", "score", *metrics, "scenarios", "n/a", "errors", "unfinished"]
    rows = []
    for i, rec in enumerate(table.to_dict("records"), 1):
        rows.append([
            *([str(i)] if ranked else []), marked(rec["entrant"], rec.get("kind", DEPLOYABLE)),
            fmt(rec["score"]),
            *(fmt(rec[m]) for m in metrics), f"{rec['scenarios']} of {rec['common']}",
            str(rec["n/a"]), str(rec["errors"]), str(rec["unfinished"]),
        ])  # fmt: skip
    return headers, rows


def seed_ranges(seeds: list[int]) -> str:
    """``[101, 102, 103, 105]`` -> ``101-103, 105``."""
    runs: list[list[int]] = []
    for s in sorted(seeds):
        if runs and s == runs[-1][1] + 1:
            runs[-1][1] = s
        else:
            runs.append([s, s])
    return ", ".join(str(a) if a == b else f"{a}-{b}" for a, b in runs)

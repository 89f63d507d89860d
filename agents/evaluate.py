"""Evaluate agents next to heuristics on scenario sets (native engine runs).

Every row records the kind of the policy that ran (deployable, clairvoyant or bound; see
``dlcluster_gym.scheduler.policy_kind``), and the tables mark the columns of clairvoyant
policies and bounds. "The best heuristic" an agent is compared with is the best deployable
one; the best clairvoyant one is shown beside it (:func:`best_rows`, :func:`best_table`).

Statistics (:func:`scenario_stats`, :func:`aggregate`): per scenario and policy, the mean over
seeds of average and P99 JCT and of the per-seed ratio to a reference policy, each with a 95 %
Student-t confidence interval over the seeds. A scenario where every policy that schedules
(bounds aside) has the same average JCT within a relative tolerance on every seed is "no
decision" (:func:`no_decision`): it cannot tell policies apart and is left out of the
aggregate, the geometric mean over the decisive scenarios of the per-scenario mean ratios.

The room (:func:`room_stats`, ``dlcluster_gym.leaderboard.room``): per scenario, how far the
best clairvoyant policy of the room's reference set is below its best deployable one, among
those the evaluation ran; each agent's fraction of it closed, paired per seed, with its CI
(a ratio of sums over the seeds, a paired bootstrap interval).
Scenarios with less than 5 % room are "no room" and left out of the mean over scenarios."""

from __future__ import annotations

import io
import math
from collections.abc import Callable, Collection, Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from dlcluster_gym.api import simulate

from .config import ScenarioSpec
from .envs import available, scenario_mapping

HEURISTICS: dict[str, tuple[str, ...]] = {
    "placement": ("dally", "dally-manual", "tiresias", "gandiva"),
    "delay-timer": ("dally", "dally-manual", "tiresias", "gandiva"),
    "scheduler": ("dally", "tiresias", "gandiva", "fcfs", "las-slots", "srw", "ideal"),
}
"""The policies each agent kind is compared with by default (``dlcluster evaluate`` adds
those of every agent it evaluates to ``DEFAULT_BASELINES``)."""
DEFAULT_BASELINES: tuple[str, ...] = (
    "dally", "dally-manual", "tiresias", "gandiva", "themis", "cassini", "qssf",
    "qssf-preemptive", "srsf", "srw", "ideal",
)  # fmt: skip
"""The paper heuristics, Helios's QSSF (and its preemptive form), then the clairvoyant
``srsf`` and ``srw`` references and the ``ideal`` bound."""
METRICS = ("avg_jct_s", "p95_jct_s", "p99_jct_s", "makespan_s", "avg_queue_s")
TIE_RTOL = 1e-3
"""Default relative tolerance of :func:`no_decision`."""
CI_LEVEL = 0.95
FIGURE_NOTES = {
    "clairvoyant": "knows job lengths or future arrivals",
    "bound": "an analytical bound, not a schedule",
}

PolicyMaker = Callable[[], Any]  # -> a fresh scheduler object


def default_baselines(agent_kinds: Sequence[str]) -> list[str]:
    """``DEFAULT_BASELINES`` plus the ``HEURISTICS`` of the given agent kinds (``placement``,
    ``delay-timer``, ``scheduler``), deployable first, then clairvoyant ones and bounds."""
    from dlcluster_gym.leaderboard.suite import entrant_kind
    from dlcluster_gym.leaderboard.tables import by_kind

    names = list(DEFAULT_BASELINES)
    for kind in agent_kinds:
        names += [h for h in HEURISTICS.get(kind, ()) if h not in names]
    return by_kind(names, {n: entrant_kind(n) for n in names})


def count_runs(
    n_policies: int,
    scenarios: Sequence[ScenarioSpec],
    seeds: Sequence[int],
    traces_dir: str | Path | None = None,
) -> int:
    """How many simulations :func:`run_set` makes for these arguments."""
    specs, _ = available(scenarios, traces_dir)
    return n_policies * sum(len(s.seeds_or(seeds)) for s in specs)


def run_set(
    policies: dict[str, str | PolicyMaker],
    scenarios: Sequence[ScenarioSpec],
    seeds: Sequence[int],
    traces_dir: str | Path | None = None,
    progress: Callable[[str], None] | None = None,
) -> list[dict[str, Any]]:
    """One row per (scenario, seed, policy) with the summary metrics and the policy's kind;
    a scenario runs its own ``seeds`` where its spec names them, else ``seeds``. Scenarios
    that need traces are skipped when the trace root is absent (reported by ``available``).
    ``progress`` gets one line after each run."""
    specs, _ = available(scenarios, traces_dir)
    rows = []
    for spec in specs:
        mapping = scenario_mapping(spec)
        for seed in spec.seeds_or(seeds):
            for label, pol in policies.items():
                obj = pol if isinstance(pol, str) else pol()
                res = simulate(mapping, obj, int(seed), traces_dir=traces_dir)
                row = {"scenario": spec.name, "seed": int(seed), "policy": label}
                row["kind"] = res.kind
                row.update({k: float(res.summary.get(k, float("nan"))) for k in METRICS})
                row["jobs_unfinished"] = int(res.summary.get("jobs_unfinished", 0))
                rows.append(row)
                if progress is not None:
                    progress(f"{spec.name} seed {seed} {label}: {row['avg_jct_s'] / 3600:.2f} h")
    return rows


def relative_score(rows: Sequence[dict[str, Any]], policy: str, reference: str) -> float:
    """Mean over (scenario, seed) of policy avg JCT / reference avg JCT (lower is better).

    A run that leaves jobs unfinished scores ``inf``: its average JCT covers only the jobs
    it did finish, so it would otherwise reward a policy that declines hard jobs forever."""
    ref = {(r["scenario"], r["seed"]): r["avg_jct_s"] for r in rows if r["policy"] == reference}
    ratios = [
        math.inf
        if r.get("jobs_unfinished", 0)
        else r["avg_jct_s"] / ref[(r["scenario"], r["seed"])]
        for r in rows
        if r["policy"] == policy and (r["scenario"], r["seed"]) in ref
    ]
    return float(np.mean(ratios)) if ratios else float("nan")


def summary_table(rows: Sequence[dict[str, Any]], reference: str = "dally") -> list[dict[str, Any]]:
    """Per scenario and policy: its kind, mean avg JCT (h) over seeds and its ratio to
    ``reference``; a last block ``ALL`` averages the ratios over every (scenario, seed)."""
    policies = list(dict.fromkeys(r["policy"] for r in rows))
    scenarios = list(dict.fromkeys(r["scenario"] for r in rows))
    kinds = kinds_of(rows)
    out = []
    for sc in scenarios:
        sub = [r for r in rows if r["scenario"] == sc]
        for p in policies:
            vals = [r["avg_jct_s"] for r in sub if r["policy"] == p]
            if vals:
                out.append(
                    {
                        "scenario": sc,
                        "policy": p,
                        "kind": kinds[p],
                        "seeds": len(vals),
                        "avg_jct_h": _mean_h(sub, p, "avg_jct_s"),
                        "vs_ref": relative_score(sub, p, reference),
                        "makespan_h": _mean_h(sub, p, "makespan_s"),
                        "p99_jct_h": _mean_h(sub, p, "p99_jct_s"),
                        "unfinished": sum(
                            r.get("jobs_unfinished", 0) for r in sub if r["policy"] == p
                        ),
                    }
                )
    for p in policies:
        out.append(
            {
                "scenario": "ALL",
                "policy": p,
                "kind": kinds[p],
                "seeds": sum(1 for r in rows if r["policy"] == p),
                "avg_jct_h": _mean_h(rows, p, "avg_jct_s"),
                "vs_ref": relative_score(rows, p, reference),
                "makespan_h": _mean_h(rows, p, "makespan_s"),
                "unfinished": sum(r.get("jobs_unfinished", 0) for r in rows if r["policy"] == p),
            }
        )
    return out


def _mean_h(rows: Sequence[dict[str, Any]], policy: str, key: str) -> float:
    vals = [r[key] for r in rows if r["policy"] == policy]
    return float(np.mean(vals)) / 3600.0 if vals else float("nan")


def _metric_table(table: Sequence[dict[str, Any]], key: str, reference: str, digits: int) -> str:
    """Mean ``key`` (hours) per scenario and policy with its ratio to ``reference``'s, as
    Markdown."""
    policies = list(dict.fromkeys(r["policy"] for r in table))
    cell = {(r["scenario"], r["policy"]): r for r in table if r["scenario"] != "ALL"}
    lines = [_header(table, policies), "|---|" + "---:|" * len(policies)]
    for sc in dict.fromkeys(r["scenario"] for r in table if r["scenario"] != "ALL"):
        ref = cell[(sc, reference)].get(key, math.nan) if (sc, reference) in cell else math.nan
        vals = [
            f"{cell[(sc, p)][key]:.{digits}f} h ({cell[(sc, p)][key] / ref:.2f})"
            if (sc, p) in cell and key in cell[(sc, p)]
            else ""
            for p in policies
        ]
        lines.append(f"| {sc} | " + " | ".join(vals) + " |")
    return _with_legend(lines, table)


def makespan_table(table: Sequence[dict[str, Any]], reference: str = "dally") -> str:
    """Mean makespan (h) per scenario and policy, with its ratio to ``reference``'s, as
    Markdown: the check that a lower average JCT was not bought by holding jobs back."""
    return _metric_table(table, "makespan_h", reference, 0)


def p99_table(table: Sequence[dict[str, Any]], reference: str = "dally") -> str:
    """Mean P99 JCT (h) per scenario and policy, with its ratio to ``reference``'s, as
    Markdown: the tail a lower average JCT may cost."""
    return _metric_table(table, "p99_jct_h", reference, 1)


def markdown_table(table: Sequence[dict[str, Any]], reference: str = "dally") -> str:
    """The summary table as Markdown (one row per scenario, one column per policy)."""
    policies = list(dict.fromkeys(r["policy"] for r in table))
    scenarios = list(dict.fromkeys(r["scenario"] for r in table))
    cell = {(r["scenario"], r["policy"]): r for r in table}
    lines = [_header(table, policies), "|---|" + "---:|" * len(policies)]
    for sc in scenarios:
        vals = []
        for p in policies:
            r = cell.get((sc, p))
            if r is None:
                vals.append("")
            elif r.get("unfinished"):
                vals.append(f"{r['avg_jct_h']:.2f} h, {r['unfinished']} jobs unfinished")
            elif sc == "ALL":
                vals.append(f"{r['vs_ref']:.3f} x {reference}")
            else:
                vals.append(f"{r['avg_jct_h']:.2f} h ({r['vs_ref']:.3f})")
        lines.append(f"| {sc} | " + " | ".join(vals) + " |")
    return _with_legend(lines, table)


# --------------------------------------------------------------------------- kinds


def kinds_of(
    rows: Sequence[dict[str, Any]], known: Mapping[str, str] | None = None
) -> dict[str, str]:
    """Policy label -> kind: as its rows record it (:func:`run_set` records the kind of the
    policy that ran), else ``known[label]``, else the kind of the registered policy of that
    name with its default parameters; ``unknown`` when none of these tells (rows written
    before kinds were recorded, under a label that is not a policy name)."""
    from dlcluster_gym.leaderboard.suite import entrant_kind

    out: dict[str, str] = {}
    for r in rows:
        if r.get("kind"):
            out.setdefault(r["policy"], r["kind"])
    for p in dict.fromkeys(r["policy"] for r in rows):
        if p not in out:
            out[p] = (known or {}).get(p) or entrant_kind(p)
    return out


def _header(table: Sequence[dict[str, Any]], policies: Sequence[str]) -> str:
    from dlcluster_gym.leaderboard.tables import marked

    kinds = kinds_of(table)
    return "| scenario | " + " | ".join(marked(p, kinds[p]) for p in policies) + " |"


def _with_legend(lines: list[str], table: Sequence[dict[str, Any]]) -> str:
    """The table's lines, and under them what its marks mean (when it has any)."""
    from dlcluster_gym.leaderboard.tables import legend

    note = legend(kinds_of(table).values(), ranking=False)
    return "\n".join(lines) + (f"\n\n{note}" if note else "")


def _score(rows: Sequence[dict[str, Any]], policy: str, reference: str, aggregate: str) -> float:
    """``policy``'s ratio to ``reference`` over ``rows``: ``"mean"``, :func:`relative_score`
    (the mean over every (scenario, seed)); ``"geomean"``, the geometric mean over scenarios
    of the per-scenario :func:`relative_score`."""
    if aggregate == "mean":
        return relative_score(rows, policy, reference)
    if aggregate != "geomean":
        raise ValueError(f"aggregate must be 'mean' or 'geomean', got {aggregate!r}")
    scenarios = dict.fromkeys(r["scenario"] for r in rows)
    per = [relative_score([r for r in rows if r["scenario"] == sc], policy, reference)
           for sc in scenarios]  # fmt: skip
    return geometric_mean([x for x in per if not math.isnan(x)])


def best_heuristics(
    rows: Sequence[dict[str, Any]],
    agents: Collection[str],
    reference: str,
    kinds: Mapping[str, str] | None = None,
    aggregate: str = "mean",
) -> dict[str, str | None]:
    """The best deployable and the best clairvoyant heuristic of ``rows`` (agents and bounds
    are not heuristics): the lowest ratio to ``reference`` (:func:`_score` with
    ``aggregate``), so a policy that left jobs unfinished is never best.
    ``{"deployable": label or None, "clairvoyant": ...}``."""
    kinds = {**kinds_of(rows), **(kinds or {})}
    best: dict[str, str | None] = {"deployable": None, "clairvoyant": None}
    for kind in best:
        cands = [
            p
            for p in dict.fromkeys(r["policy"] for r in rows)
            if p not in agents and kinds.get(p) == kind
        ]
        scored = [(_score(rows, p, reference, aggregate), p) for p in cands]
        scored = [(x, p) for x, p in scored if not math.isnan(x)]
        if scored:
            best[kind] = min(scored, key=lambda t: t[0])[1]
    return best


def best_rows(
    rows: Sequence[dict[str, Any]],
    agents: Sequence[str],
    reference: str = "dally",
    kinds: Mapping[str, str] | None = None,
    exclude: Collection[str] = (),
    aggregate: str = "mean",
) -> list[dict[str, Any]]:
    """Per scenario (then ``ALL``, every scenario not in ``exclude`` together) and agent: the
    agent's kind and mean avg JCT (h), the best deployable heuristic (the best heuristic,
    :func:`best_heuristics`) and the agent's ratio to it, and the same for the best
    clairvoyant one. Ratios: :func:`relative_score` per scenario; for ``ALL`` the mean over
    every (scenario, seed) (``aggregate="mean"``) or the geometric mean of the per-scenario
    ratios (``"geomean"``). ``decision`` is False for the scenarios in ``exclude`` (e.g.
    :func:`no_decision` ones)."""
    kinds = {**kinds_of(rows), **(kinds or {})}
    scenarios = list(dict.fromkeys(r["scenario"] for r in rows))
    kept = [r for r in rows if r["scenario"] not in exclude]
    out = []
    for sc in [*scenarios, "ALL"]:
        sub = kept if sc == "ALL" else [r for r in rows if r["scenario"] == sc]
        how = aggregate if sc == "ALL" else "mean"
        best = best_heuristics(sub, agents, reference, kinds, how)
        for a in agents:
            if not any(r["policy"] == a for r in sub):
                continue
            rec: dict[str, Any] = {
                "scenario": sc, "agent": a, "kind": kinds.get(a, "unknown"),
                "avg_jct_h": _mean_h(sub, a, "avg_jct_s"), "decision": sc not in exclude,
            }  # fmt: skip
            for kind, label in best.items():
                rec[f"best_{kind}"] = label
                rec[f"vs_best_{kind}"] = (
                    _score(sub, a, label, how) if label is not None else math.nan
                )
            out.append(rec)
    return out


def best_table(
    rows: Sequence[dict[str, Any]],
    agents: Sequence[str],
    reference: str = "dally",
    kinds: Mapping[str, str] | None = None,
    exclude: Collection[str] = (),
    aggregate: str = "mean",
) -> str:
    """:func:`best_rows` as Markdown: each agent against the best deployable heuristic, with
    the best clairvoyant heuristic beside it (a reference: it knows job lengths)."""
    lines = [
        "| scenario | agent | kind | avg JCT (h) | best heuristic (deployable) | agent / it | "
        "best clairvoyant heuristic | agent / it |",
        "|---|---|---|---:|---|---:|---|---:|",
    ]

    def ratio(x: float) -> str:
        return "-" if math.isnan(x) else f"{x:.3f}"

    for r in best_rows(rows, agents, reference, kinds, exclude, aggregate):
        sc = r["scenario"] if r["decision"] else f"{r['scenario']} (no decision)"
        lines.append(
            f"| {sc} | {r['agent']} | {r['kind']} | {r['avg_jct_h']:.2f} | "
            f"{r['best_deployable'] or '(none)'} | {ratio(r['vs_best_deployable'])} | "
            f"{r['best_clairvoyant'] or '(none)'} | {ratio(r['vs_best_clairvoyant'])} |"
        )
    return "\n".join(lines)


# --------------------------------------------------------------------------- statistics


def mean_ci(values: Sequence[float], level: float = CI_LEVEL) -> tuple[float, float]:
    """(mean, half-width of the Student-t ``level`` confidence interval) of ``values``: the
    half-width is ``t(1 - (1 - level) / 2, n - 1) * s / sqrt(n)`` with ``s`` the sample
    standard deviation; NaN for fewer than two values. A NaN among the values gives
    (NaN, NaN), an infinite one (a run that left jobs unfinished) (inf, NaN)."""
    from dlcluster_gym.leaderboard.tables import mean_ci as t_interval

    v = np.asarray(values, dtype=np.float64)
    if v.size == 0 or np.isnan(v).any():
        return math.nan, math.nan
    if np.isinf(v).any():
        return math.inf, math.nan
    return t_interval(v, level)


def geometric_mean(values: Sequence[float]) -> float:
    """exp(mean(log x)); inf if any value is inf, NaN if none or any is not positive."""
    v = np.asarray(values, dtype=np.float64)
    if v.size == 0 or np.isnan(v).any() or (v <= 0).any():
        return math.nan
    if np.isinf(v).any():
        return math.inf
    return float(np.exp(np.mean(np.log(v))))


def _schedules(kind: str) -> bool:
    return kind != "bound"


def tied(rows: Sequence[dict[str, Any]], rtol: float = TIE_RTOL) -> bool:
    """Whether ``rows`` (one scenario) cannot tell its policies apart: on every seed, the
    policies that schedule (every kind but bounds, which are not schedules) left the same
    number of jobs unfinished and their average JCTs differ by at most ``rtol`` times the
    smallest (max - min <= rtol * min). False with fewer than two such policies."""
    kinds = kinds_of(rows)
    by_seed: dict[int, list[dict[str, Any]]] = {}
    for r in rows:
        if _schedules(kinds[r["policy"]]):
            by_seed.setdefault(r["seed"], []).append(r)
    if not by_seed or any(len({r["policy"] for r in rs}) < 2 for rs in by_seed.values()):
        return False
    for rs in by_seed.values():
        vals = np.array([r["avg_jct_s"] for r in rs], dtype=np.float64)
        if not np.isfinite(vals).all() or len({r.get("jobs_unfinished", 0) for r in rs}) > 1:
            return False
        if vals.max() - vals.min() > rtol * abs(vals.min()):
            return False
    return True


def no_decision(rows: Sequence[dict[str, Any]], rtol: float = TIE_RTOL) -> list[str]:
    """The scenarios of ``rows`` where every policy ties (:func:`tied`)."""
    scenarios = dict.fromkeys(r["scenario"] for r in rows)
    return [sc for sc in scenarios if tied([r for r in rows if r["scenario"] == sc], rtol)]


def _per_seed_ratios(
    rows: Sequence[dict[str, Any]], policy: str, reference: str, key: str
) -> list[float]:
    """``policy``'s ``key`` / ``reference``'s on each seed both ran (inf for a run that left
    jobs unfinished, as in :func:`relative_score`)."""
    ref = {r["seed"]: r[key] for r in rows if r["policy"] == reference}
    return [
        math.inf if r.get("jobs_unfinished", 0) else r[key] / ref[r["seed"]]
        for r in rows
        if r["policy"] == policy and r["seed"] in ref
    ]


def scenario_stats(
    rows: Sequence[dict[str, Any]], reference: str = "dally", rtol: float = TIE_RTOL
) -> list[dict[str, Any]]:
    """Per scenario and policy: its kind, the number of seeds, whether the scenario decides
    anything (:func:`tied`), and (mean, 95 % CI half-width) over seeds (:func:`mean_ci`) of
    avg JCT (h), P99 JCT (h) and the per-seed ratios of each to ``reference``'s on the same
    seed (``ratio``, ``p99_ratio``), and the jobs left unfinished over all seeds."""
    kinds = kinds_of(rows)
    out = []
    for sc in dict.fromkeys(r["scenario"] for r in rows):
        sub = [r for r in rows if r["scenario"] == sc]
        decides = not tied(sub, rtol)
        for p in dict.fromkeys(r["policy"] for r in sub):
            mine = [r for r in sub if r["policy"] == p]
            rec: dict[str, Any] = {
                "scenario": sc, "policy": p, "kind": kinds[p], "seeds": len(mine),
                "decision": decides,
            }  # fmt: skip
            for name, vals in (
                ("avg_jct_h", [r["avg_jct_s"] / 3600.0 for r in mine]),
                ("p99_jct_h", [r["p99_jct_s"] / 3600.0 for r in mine]),
                ("ratio", _per_seed_ratios(sub, p, reference, "avg_jct_s")),
                ("p99_ratio", _per_seed_ratios(sub, p, reference, "p99_jct_s")),
            ):
                rec[name], rec[f"{name}_ci"] = mean_ci(vals)
            rec["unfinished"] = sum(int(r.get("jobs_unfinished", 0)) for r in mine)
            out.append(rec)
    return out


def aggregate(stats: Sequence[dict[str, Any]]) -> list[dict[str, Any]]:
    """Per policy, over the decisive scenarios of ``stats`` (:func:`scenario_stats`): the
    geometric mean of its per-scenario mean ratios to the reference (avg and P99 JCT) and
    the number of scenarios it covers."""
    kinds = kinds_of(stats)
    out = []
    for p in dict.fromkeys(r["policy"] for r in stats):
        mine = [r for r in stats if r["policy"] == p and r["decision"]]
        out.append(
            {
                "policy": p,
                "kind": kinds[p],
                "scenarios": len(mine),
                "ratio_geomean": geometric_mean([r["ratio"] for r in mine]),
                "p99_ratio_geomean": geometric_mean([r["p99_ratio"] for r in mine]),
            }
        )
    return out


def _pm(mean: float, half: float, digits: int, unit: str = "") -> str:
    if math.isinf(mean):
        return "inf"
    if math.isnan(half):
        return f"{mean:.{digits}f}{unit}"
    return f"{mean:.{digits}f} ± {half:.{digits}f}{unit}"


def ci_table(
    stats: Sequence[dict[str, Any]],
    agg: Sequence[dict[str, Any]],
    reference: str,
    metric: str = "avg",
    rtol: float = TIE_RTOL,
) -> str:
    """:func:`scenario_stats` as Markdown for ``metric`` (``"avg"`` or ``"p99"`` JCT): one row
    per scenario ("no decision" ones marked), one column per policy, each cell the mean ±
    95 % CI in hours and, in brackets, the mean per-seed ratio to ``reference`` ± its CI;
    a last row with the :func:`aggregate` over the decisive scenarios; a footnote saying
    how each number was computed and what the marks mean."""
    key, rkey = {"avg": ("avg_jct_h", "ratio"), "p99": ("p99_jct_h", "p99_ratio")}[metric]
    gkey = {"avg": "ratio_geomean", "p99": "p99_ratio_geomean"}[metric]
    policies = list(dict.fromkeys(r["policy"] for r in stats))
    cell = {(r["scenario"], r["policy"]): r for r in stats}
    lines = [_header(stats, policies), "|---|" + "---:|" * len(policies)]
    decisive = 0
    for sc in dict.fromkeys(r["scenario"] for r in stats):
        vals, decides = [], True
        for p in policies:
            r = cell.get((sc, p))
            if r is None:
                vals.append("")
                continue
            decides = r["decision"]
            text = f"{_pm(r[key], r[f'{key}_ci'], 2, ' h')} ({_pm(r[rkey], r[f'{rkey}_ci'], 3)})"
            if r["unfinished"]:
                text += f", {r['unfinished']} jobs unfinished"
            vals.append(text)
        decisive += decides
        label = sc if decides else f"{sc} (no decision)"
        lines.append(f"| {label} | " + " | ".join(vals) + " |")
    by_policy = {a["policy"]: a for a in agg}
    gm = [
        "" if p not in by_policy or math.isnan(by_policy[p][gkey]) else f"{by_policy[p][gkey]:.3f}"
        for p in policies
    ]
    plural = "" if decisive == 1 else "s"
    lines.append(f"| geometric mean, {decisive} decisive scenario{plural} | {' | '.join(gm)} |")
    n = sorted({r["seeds"] for r in stats})
    seeds = f"{n[0]}" if len(n) == 1 else f"{n[0]}-{n[-1]}"
    notes = [
        f"Cells: mean over {seeds} seeds ± half-width of the 95 % Student-t confidence interval "
        f"(t with n - 1 degrees of freedom; no ± with one seed); in brackets the mean of the "
        f"per-seed ratios to {reference} (this policy's value / {reference}'s on the same "
        "seed) ± its 95 % CI; a run that left jobs unfinished has ratio inf.",
        *(  # only under a table that marks a scenario so
            [
                f"no decision: every policy that schedules (bounds aside) had the same average "
                f"JCT within a relative tolerance of {rtol:g} on every seed; such a scenario "
                "cannot tell policies apart and is left out of the last row."
            ]
            if any(not r["decision"] for r in stats)
            else []
        ),
        "Last row: the geometric mean, over the decisive scenarios, of the per-scenario mean "
        f"ratios to {reference}.",
    ]
    return _with_legend([*lines, "", *notes], stats)


def ratio_figure(
    stats: Sequence[dict[str, Any]], agg: Sequence[dict[str, Any]], reference: str
) -> bytes:
    """PNG bytes: per scenario (then the aggregate), each policy's mean avg-JCT ratio to
    ``reference`` with its 95 % CI as error bars; clairvoyant policies and bounds hatched
    and marked in the legend, "no decision" scenarios shaded and labelled. The reference
    itself (1.0 on every seed) is the dashed line."""
    import matplotlib

    matplotlib.use("Agg", force=False)
    import matplotlib.pyplot as plt

    from dlcluster_gym.leaderboard.plots import HATCHES, ci_whiskers
    from dlcluster_gym.leaderboard.tables import marked

    kinds = kinds_of(stats)
    policies = [p for p in dict.fromkeys(r["policy"] for r in stats) if p != reference]
    scenarios = list(dict.fromkeys(r["scenario"] for r in stats))
    cell = {(r["scenario"], r["policy"]): r for r in stats}
    decides = {r["scenario"]: r["decision"] for r in stats}
    by_policy = {a["policy"]: a for a in agg}
    groups = [*scenarios, "geometric mean\n(decisive)"]
    width = 0.8 / max(1, len(policies))
    cmap = plt.get_cmap("tab20")
    fig, ax = plt.subplots(figsize=(max(7.0, 1.2 + 0.35 * len(groups) * max(1, len(policies))), 5))
    top = 0.0
    for i, p in enumerate(policies):
        vals = [
            (cell[(sc, p)]["ratio"], cell[(sc, p)]["ratio_ci"]) if (sc, p) in cell
            else (math.nan, math.nan)
            for sc in scenarios
        ]  # fmt: skip
        vals.append((by_policy.get(p, {}).get("ratio_geomean", math.nan), math.nan))
        heights = [v[0] if math.isfinite(v[0]) else 0.0 for v in vals]
        top = max([top, *(v[0] + (v[1] if math.isfinite(v[1]) else 0) for v in vals
                          if math.isfinite(v[0]))])  # fmt: skip
        x = np.arange(len(groups)) - 0.4 + width * (i + 0.5)
        color = cmap((2 * i) % 20 + (i // 10) % 2)
        kind = kinds[p]
        yerr = ci_whiskers(vals)
        if yerr is not None:
            yerr[:, -1] = np.nan  # the aggregate has no interval
        bars = ax.bar(x, heights, width, yerr=yerr, capsize=2, color=color,
                      label=marked(p, kind))  # fmt: skip
        if kind != "deployable":
            for bar in bars:
                bar.set(hatch=HATCHES.get(kind, "..."), edgecolor=color, lw=1.0)
                bar.set_facecolor((1, 1, 1, 0))
        for xi, v in zip(x, vals, strict=True):
            if math.isinf(v[0]):
                ax.text(xi, 0.02, "unfinished", rotation=90, ha="center", va="bottom", fontsize=6)
    ax.axhline(1.0, color="0.3", ls="--", lw=1, label=f"{reference} (reference)")
    ymax = max(1.2, top * 1.1)
    for j, sc in enumerate(scenarios):
        if not decides[sc]:
            ax.axvspan(j - 0.5, j + 0.5, color="0.85", zorder=0)
            ax.text(j, ymax * 0.97, "no decision", ha="center", va="top", fontsize=8)
    ax.set_ylim(0, ymax)
    ax.set_xticks(np.arange(len(groups)), groups, rotation=30, ha="right", fontsize=8)
    ax.set_ylabel(f"avg JCT / {reference}'s (per-seed ratio)")
    ax.set_title(f"Average JCT relative to {reference}: mean over seeds, 95 % CI")
    ax.legend(fontsize=7, ncol=2)
    notes = [f"hatched {marked('', k).strip()}: {FIGURE_NOTES[k]}"
             for k in ("clairvoyant", "bound") if k in kinds.values()]  # fmt: skip
    if notes:
        fig.text(0.5, 0.01, "; ".join(notes) + "; not ranked", ha="center", fontsize=7)
    fig.tight_layout(rect=(0, 0.04 if notes else 0, 1, 1))
    buf = io.BytesIO()
    fig.savefig(buf, format="png", dpi=100)
    plt.close(fig)
    return buf.getvalue()


# --------------------------------------------------------------------------- the room


def _jcts(rows: Sequence[dict[str, Any]], policy: str) -> dict[int, float]:
    """Seed -> ``policy``'s average JCT (inf for a run that left jobs unfinished)."""
    return {
        r["seed"]: math.inf if r.get("jobs_unfinished", 0) else float(r["avg_jct_s"])
        for r in rows
        if r["policy"] == policy
    }


def room_stats(rows: Sequence[dict[str, Any]], agents: Collection[str]) -> dict[str, Any]:
    """The room of each scenario of ``rows`` over the reference set's policies the rows ran
    (``room.scenario_room``; a policy counts under its reference kind when its rows record
    that kind; agents never count), each agent's fraction of it closed
    (``room.fraction_closed``) and, per agent, the mean fraction over the scenarios with
    room. ``{"reference": names that ran, "missing": reference names that did not,
    "scenarios": [scenario_room + "scenario"], "closed": [fraction_closed + "scenario",
    "agent"], "summary": [{"agent", "fraction", "scenarios"}]}``."""
    from dlcluster_gym.leaderboard import room

    kinds = kinds_of(rows)
    ran = [p for p in room.REFERENCE if p in kinds and p not in agents
           and kinds[p] == room.REFERENCE[p]]  # fmt: skip
    ref_kinds = {p: room.REFERENCE[p] for p in ran}
    out: dict[str, Any] = {"reference": ran, "missing": [p for p in room.REFERENCE if p not in ran],
                           "scenarios": [], "closed": [], "summary": []}  # fmt: skip
    for sc in dict.fromkeys(r["scenario"] for r in rows):
        sub = [r for r in rows if r["scenario"] == sc]
        stats = room.scenario_room({p: _jcts(sub, p) for p in ran}, ref_kinds)
        out["scenarios"].append({"scenario": sc, **stats})
        for a in agents:
            if any(r["policy"] == a for r in sub):
                frac = room.fraction_closed(_jcts(sub, a), stats)
                out["closed"].append({"scenario": sc, "agent": a, **frac})
    for a in agents:
        mean, n = room.mean_fraction(f for f in out["closed"] if f["agent"] == a)
        out["summary"].append({"agent": a, "fraction": mean, "scenarios": n})
    return out


def room_table(stats: dict[str, Any]) -> str:
    """:func:`room_stats` as Markdown: per scenario the best deployable and clairvoyant
    reference policies (mean average JCT over seeds, h), the room (mean ± 95 % CI) and each
    agent's fraction of it closed (mean ± 95 % CI), "no room" where the room is below 5 %;
    a last row with each agent's mean over the scenarios with room; a footnote."""
    from dlcluster_gym.leaderboard import room

    agents = [s["agent"] for s in stats["summary"]]
    closed = {(c["scenario"], c["agent"]): c for c in stats["closed"]}
    lines = [
        "| scenario | best deployable | best clairvoyant | room | "
        + " | ".join(agents) + " |",
        "|---|---|---|---:|" + "---:|" * len(agents),
    ]  # fmt: skip

    def best(r: dict[str, Any], kind: str) -> str:
        name = r[f"best_{kind}"]
        return "-" if name is None else f"{name} ({r[f'best_{kind}_avg_jct_s'] / 3600:.2f} h)"

    for r in stats["scenarios"]:
        sc, verdict = r["scenario"], r["verdict"]
        if verdict == room.NOT_AVAILABLE:
            cells = [room.NOT_AVAILABLE] * len(agents)
            text = room.NOT_AVAILABLE
        else:
            text = _pm(100 * r["room"], 100 * r["room_ci"], 1, " %")
            cells = []
            for a in agents:
                c = closed.get((sc, a))
                if c is None:
                    cells.append("")
                elif verdict == room.NO_ROOM:
                    cells.append(room.NO_ROOM)
                elif math.isinf(c["fraction"]):
                    cells.append("jobs unfinished")
                else:
                    cells.append("-" if math.isnan(c["fraction"])
                                 else _pm(c["fraction"], c["fraction_ci"], 2))  # fmt: skip
            if verdict == room.NO_ROOM:
                text += f" ({room.NO_ROOM})"
        lines.append(f"| {sc} | {best(r, 'deployable')} | {best(r, 'clairvoyant')} | {text} | "
                     + " | ".join(cells) + " |")  # fmt: skip
    with_room = room.mean_room(stats["scenarios"])[1]
    label = f"mean over the {with_room} scenario{'' if with_room == 1 else 's'} with room"
    means = ["-" if math.isnan(s["fraction"]) else f"{s['fraction']:.2f}"
             for s in stats["summary"]]  # fmt: skip
    lines.append(f"| {label} | | | | " + " | ".join(means) + " |")
    missing = ", ".join(stats["missing"]) or "none"
    notes = [
        "Room on a seed: 1 - C / D, with D the lowest average JCT of the deployable reference "
        "policies and C that of the clairvoyant ones (of "
        f"{', '.join(room.REFERENCE)}, those this evaluation ran; not run here: {missing}); "
        "best: the lowest mean over seeds. Room: mean over seeds ± half-width of the 95 % "
        "Student-t CI. Fraction closed: sum(D - A) / sum(D - C) over the seeds, with A the "
        "agent's average JCT (0: the best heuristic's, 1: the clairvoyant reference's, above "
        "1: better than it) ± half the width of its 95 % paired bootstrap interval over the "
        f"seeds; '{room.NO_ROOM}': mean room below {room.NO_ROOM_BELOW:.0%}, left out of the "
        "last row.",
    ]
    return "\n".join([*lines, "", *notes])


# --------------------------------------------------------------------------- reports


def evaluation_report(
    rows: Sequence[dict[str, Any]],
    agents: Sequence[str],
    reference: str = "dally",
    rtol: float = TIE_RTOL,
) -> dict[str, Any]:
    """Everything ``dlcluster evaluate`` reports on ``rows``: the settings, the "no decision"
    scenarios, :func:`scenario_stats` (``stats``), :func:`aggregate` (``aggregate``), the
    per-scenario means of :func:`summary_table` (``summary``) and :func:`best_rows` over the
    decisive scenarios with the geometric-mean aggregate (``best``), the room and each
    agent's fraction of it closed (:func:`room_stats`, ``room``), and the rows."""
    undecided = no_decision(rows, rtol)
    stats = scenario_stats(rows, reference, rtol)
    return {
        "reference": reference,
        "tie_rtol": rtol,
        "ci_level": CI_LEVEL,
        "agents": list(agents),
        "seeds": {
            sc: sorted({r["seed"] for r in rows if r["scenario"] == sc})
            for sc in dict.fromkeys(r["scenario"] for r in rows)
        },
        "no_decision": undecided,
        "stats": stats,
        "aggregate": aggregate(stats),
        "summary": summary_table(rows, reference),
        "best": best_rows(rows, list(agents), reference, exclude=undecided, aggregate="geomean"),
        "room": room_stats(rows, agents),
        "rows": list(rows),
    }


def report_sections(
    report: dict[str, Any], rows: Sequence[dict[str, Any]]
) -> list[tuple[str, str]]:
    """(heading, Markdown table) of an :func:`evaluation_report`, in the order
    ``dlcluster evaluate`` prints them and writes them to ``eval.md``."""
    ref, rtol = report["reference"], report["tie_rtol"]
    stats, agg = report["stats"], report["aggregate"]
    summary = report["summary"]
    sections = [
        (f"average JCT (h), mean ± 95 % CI over seeds, and per-seed ratio to {ref}",
         ci_table(stats, agg, ref, "avg", rtol)),
        (f"P99 JCT (h), mean ± 95 % CI over seeds, and per-seed ratio to {ref}",
         ci_table(stats, agg, ref, "p99", rtol)),
        (f"P99 JCT (h) and ratio to {ref} (ratio of the means over seeds)",
         p99_table(summary, ref)),
        (f"makespan (h) and ratio to {ref} (ratio of the means over seeds)",
         makespan_table(summary, ref)),
    ]  # fmt: skip
    if report["agents"]:
        note = (
            "\n\nPer scenario: the mean of the per-seed ratios; ALL: the geometric mean of the "
            "per-scenario ratios over the decisive scenarios (the best heuristic chosen on "
            "the same)."
        )
        sections.append(
            (
                "each agent against the best deployable heuristic, the best clairvoyant one "
                "beside it (average JCT)",
                best_table(
                    rows, report["agents"], ref,
                    exclude=report["no_decision"], aggregate="geomean",
                ) + note,
            )
        )  # fmt: skip
        room = report.get("room")
        if room is not None and _room_runs(room):
            sections.append(
                ("each agent's fraction of the room closed: from the best deployable reference "
                 "(0) to the best clairvoyant one (1), average JCT paired per seed",
                 room_table(room))
            )  # fmt: skip
    return sections


def _room_runs(room: dict[str, Any]) -> bool:
    """Whether the evaluation ran a deployable and a clairvoyant policy of the room's
    reference set (else the room has nothing to say and its table is left out)."""
    from dlcluster_gym.leaderboard.room import REFERENCE

    return {REFERENCE[p] for p in room["reference"]} == {"deployable", "clairvoyant"}

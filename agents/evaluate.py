"""Evaluate agents next to heuristics on scenario sets (native engine runs).

Every row records the kind of the policy that ran (deployable, clairvoyant or bound; see
``dlcluster_gym.scheduler.policy_kind``), and the tables mark the columns of clairvoyant
policies and bounds. "The best heuristic" an agent is compared with is the best deployable
one; the best clairvoyant one is shown beside it (:func:`best_rows`, :func:`best_table`)."""

from __future__ import annotations

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
    "scheduler": ("dally", "tiresias", "gandiva", "fcfs", "srw", "ideal"),
}
METRICS = ("avg_jct_s", "p95_jct_s", "p99_jct_s", "makespan_s", "avg_queueing_s")

PolicyMaker = Callable[[], Any]  # -> a fresh scheduler object


def run_set(
    policies: dict[str, str | PolicyMaker],
    scenarios: Sequence[ScenarioSpec],
    seeds: Sequence[int],
    traces_dir: str | Path | None = None,
    progress: Callable[[str], None] | None = None,
) -> list[dict[str, Any]]:
    """One row per (scenario, seed, policy) with the summary metrics and the policy's kind;
    scenarios that need traces are skipped when the trace root is absent (reported by
    ``available``)."""
    specs, _ = available(scenarios, traces_dir)
    rows = []
    for spec in specs:
        mapping = scenario_mapping(spec)
        for seed in seeds:
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


def best_heuristics(
    rows: Sequence[dict[str, Any]],
    agents: Collection[str],
    reference: str,
    kinds: Mapping[str, str] | None = None,
) -> dict[str, str | None]:
    """The best deployable and the best clairvoyant heuristic of ``rows`` (agents and bounds
    are not heuristics): the lowest :func:`relative_score` to ``reference``, so a policy that
    left jobs unfinished is never best. ``{"deployable": label or None, "clairvoyant": ...}``."""
    kinds = {**kinds_of(rows), **(kinds or {})}
    best: dict[str, str | None] = {"deployable": None, "clairvoyant": None}
    for kind in best:
        cands = [
            p
            for p in dict.fromkeys(r["policy"] for r in rows)
            if p not in agents and kinds.get(p) == kind
        ]
        scored = [(relative_score(rows, p, reference), p) for p in cands]
        scored = [(x, p) for x, p in scored if not math.isnan(x)]
        if scored:
            best[kind] = min(scored, key=lambda t: t[0])[1]
    return best


def best_rows(
    rows: Sequence[dict[str, Any]],
    agents: Sequence[str],
    reference: str = "dally",
    kinds: Mapping[str, str] | None = None,
) -> list[dict[str, Any]]:
    """Per scenario (then ``ALL``, every scenario together) and agent: the agent's kind and
    mean avg JCT (h), the best deployable heuristic (the best heuristic, :func:`best_heuristics`)
    and the agent's :func:`relative_score` to it, and the same for the best clairvoyant one."""
    kinds = {**kinds_of(rows), **(kinds or {})}
    scenarios = list(dict.fromkeys(r["scenario"] for r in rows))
    out = []
    for sc in [*scenarios, "ALL"]:
        sub = rows if sc == "ALL" else [r for r in rows if r["scenario"] == sc]
        best = best_heuristics(sub, agents, reference, kinds)
        for a in agents:
            if not any(r["policy"] == a for r in sub):
                continue
            rec: dict[str, Any] = {
                "scenario": sc, "agent": a, "kind": kinds.get(a, "unknown"),
                "avg_jct_h": _mean_h(sub, a, "avg_jct_s"),
            }  # fmt: skip
            for kind, label in best.items():
                rec[f"best_{kind}"] = label
                rec[f"vs_best_{kind}"] = (
                    relative_score(sub, a, label) if label is not None else math.nan
                )
            out.append(rec)
    return out


def best_table(
    rows: Sequence[dict[str, Any]],
    agents: Sequence[str],
    reference: str = "dally",
    kinds: Mapping[str, str] | None = None,
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

    for r in best_rows(rows, agents, reference, kinds):
        lines.append(
            f"| {r['scenario']} | {r['agent']} | {r['kind']} | {r['avg_jct_h']:.2f} | "
            f"{r['best_deployable'] or '(none)'} | {ratio(r['vs_best_deployable'])} | "
            f"{r['best_clairvoyant'] or '(none)'} | {ratio(r['vs_best_clairvoyant'])} |"
        )
    return "\n".join(lines)

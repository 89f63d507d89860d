"""Evaluate agents next to heuristics on scenario sets (native engine runs)."""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
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
    """One row per (scenario, seed, policy) with the summary metrics; scenarios that need
    traces are skipped when the trace root is absent (reported by ``available``)."""
    specs, _ = available(scenarios, traces_dir)
    rows = []
    for spec in specs:
        mapping = scenario_mapping(spec)
        for seed in seeds:
            for label, pol in policies.items():
                obj = pol if isinstance(pol, str) else pol()
                res = simulate(mapping, obj, int(seed), traces_dir=traces_dir)
                row = {"scenario": spec.name, "seed": int(seed), "policy": label}
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
    """Per scenario and policy: mean avg JCT (h) over seeds and its ratio to ``reference``;
    a last block ``ALL`` averages the ratios over every (scenario, seed)."""
    policies = list(dict.fromkeys(r["policy"] for r in rows))
    scenarios = list(dict.fromkeys(r["scenario"] for r in rows))
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
    lines = ["| scenario | " + " | ".join(policies) + " |", "|---|" + "---:|" * len(policies)]
    for sc in dict.fromkeys(r["scenario"] for r in table if r["scenario"] != "ALL"):
        ref = cell[(sc, reference)].get(key, math.nan) if (sc, reference) in cell else math.nan
        vals = [
            f"{cell[(sc, p)][key]:.{digits}f} h ({cell[(sc, p)][key] / ref:.2f})"
            if (sc, p) in cell and key in cell[(sc, p)]
            else ""
            for p in policies
        ]
        lines.append(f"| {sc} | " + " | ".join(vals) + " |")
    return "\n".join(lines)


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
    head = "| scenario | " + " | ".join(policies) + " |"
    sep = "|---|" + "---:|" * len(policies)
    lines = [head, sep]
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
    return "\n".join(lines)

"""Gandiva's time-slicing switch at the paper's measured cost against checkpoint + restore.

``gandiva`` time-slices GPU sets in 60 s quanta. Its default switch is the suspend-resume the
Gandiva paper measures (OSDI'18 4.1 as public reading notes report it: about 0.1 s for image
classification models; 1 s for the others is our choice; ``suspend_resume_s="paper"``);
``suspend_resume_s="overheads"`` charges the scenario's checkpoint + restore per switch (30 s
by default), as before the paper's cost was modelled. Both run next to
``gandiva-placement`` (no time-slicing), ``fcfs`` and ``dally`` on the Dally presets and two
ITP traces. Prints and writes a markdown table of
the average JCT (mean over seeds), the preemptions (for ``gandiva``: the time-slicing
switches) and the ratio of the average JCT to ``gandiva-placement``'s; the per-run rows go to
a CSV beside it (a run already there is not run again unless ``--fresh``).

Usage: python experiments/reproductions/gandiva_switch_cost.py [--workers 2] [--fresh]
       [--only SCENARIO ...] [--out DIR]
"""

from __future__ import annotations

import argparse
import csv
import sys
import time
from concurrent.futures import ProcessPoolExecutor, as_completed
from pathlib import Path
from typing import Any

import numpy as np

from dlcluster_gym import load_scenario, simulate

ROOT = Path(__file__).resolve().parents[2]
DALLY_SEEDS = (101, 102, 103, 104, 105)
ITP_SEEDS = (101, 102, 103)
# label -> (preset, overrides, seeds)
SCENARIOS: dict[str, tuple[str, dict[str, Any], tuple[int, ...]]] = {
    "dally-poisson-2rack": ("dally-poisson-2rack", {}, DALLY_SEEDS),
    "dally-poisson-4rack": ("dally-poisson-4rack", {}, DALLY_SEEDS),
    "dally-batch-2rack": ("dally-batch-2rack", {}, DALLY_SEEDS),
    "dally-batch-8rack": ("dally-batch-8rack", {}, DALLY_SEEDS),
    "itp-cluster01 (load 0.9, 800 jobs)": (
        "itp-cluster01",
        {"workload": {"target_load": 0.9, "max_jobs": 800}},
        ITP_SEEDS,
    ),
    "itp-cluster04": ("itp-cluster04", {}, ITP_SEEDS),
}
# label -> (policy, parameters)
POLICIES: dict[str, tuple[str, dict[str, Any]]] = {
    "fcfs": ("fcfs", {}),
    "dally": ("dally", {}),
    "gandiva-placement": ("gandiva-placement", {}),
    "gandiva suspend_resume_s=overheads": ("gandiva", {"suspend_resume_s": "overheads"}),
    "gandiva suspend_resume_s=paper (default)": ("gandiva", {}),
}
FIELDS = ("scenario", "policy", "seed", "avg_jct_s", "preemptions", "unfinished", "wall_s")


def run(cell: tuple[str, str, int]) -> dict[str, Any]:
    """One run: the scenario and policy labels and the seed -> a CSV row."""
    label, policy_label, seed = cell
    preset, overrides, _ = SCENARIOS[label]
    policy, params = POLICIES[policy_label]
    t0 = time.perf_counter()
    res = simulate(load_scenario(preset, **overrides), policy, seed, policy_params=params)
    s = res.summary
    return {
        "scenario": label,
        "policy": policy_label,
        "seed": seed,
        "avg_jct_s": float(s["avg_jct_s"]),
        "preemptions": int(s["preemptions"]),
        "unfinished": int(s["jobs_unfinished"]),
        "wall_s": round(time.perf_counter() - t0, 2),
    }


def read_rows(path: Path) -> list[dict[str, Any]]:
    if not path.is_file():
        return []
    with path.open() as f:
        return [
            {**r, "seed": int(r["seed"]), "avg_jct_s": float(r["avg_jct_s"]),
             "preemptions": int(r["preemptions"]), "unfinished": int(r["unfinished"]),
             "wall_s": float(r["wall_s"])}
            for r in csv.DictReader(f)
        ]  # fmt: skip


def write_rows(path: Path, rows: list[dict[str, Any]]) -> None:
    order = {k: i for i, k in enumerate(SCENARIOS)} | {k: i for i, k in enumerate(POLICIES)}
    rows = sorted(rows, key=lambda r: (order[r["scenario"]], order[r["policy"]], r["seed"]))
    with path.open("w", newline="") as f:
        w = csv.DictWriter(f, fieldnames=FIELDS)
        w.writeheader()
        w.writerows(rows)


def table(rows: list[dict[str, Any]], command: str, wall_s: float) -> str:
    lines = [
        "# Gandiva's time-slicing switch: the paper's suspend-resume vs checkpoint + restore",
        "",
        f"`{command}`: {len(rows)} runs, {wall_s / 60:.1f} min of wall time in all (the sum "
        "over the runs, on 2 CPU cores shared with other work; per-run rows in "
        "`switch_cost.csv`). Mean over the "
        f"seeds ({', '.join(map(str, DALLY_SEEDS))} on the Dally presets, "
        f"{', '.join(map(str, ITP_SEEDS))} on the ITP traces). `gandiva` switches at the "
        "paper's suspend-resume cost (`suspend_resume_s=paper`, the default: 0.1 s for CNNs, "
        "1 s for other models, our choice) or at the scenario's checkpoint + restore, 10 + 20 s "
        "(`suspend_resume_s=overheads`: every switch priced as a migration). Preemptions: "
        "for `gandiva` "
        "the time-slicing switches. Ratio: average JCT over `gandiva-placement`'s. Wall: "
        "mean seconds per run.",
        "",
        "| scenario | policy | avg JCT (h) | preemptions | ratio to gandiva-placement | wall (s) |",
        "|---|---|---:|---:|---:|---:|",
    ]
    for label, (_, _, seeds) in SCENARIOS.items():
        got = {
            p: [r for r in rows if r["scenario"] == label and r["policy"] == p] for p in POLICIES
        }
        if not all(len(got[p]) == len(seeds) for p in POLICIES):
            continue
        base = np.mean([r["avg_jct_s"] for r in got["gandiva-placement"]])
        for p, rs in got.items():
            jct = np.mean([r["avg_jct_s"] for r in rs])
            pre = np.mean([r["preemptions"] for r in rs])
            left = sum(r["unfinished"] for r in rs)
            note = f" ({left} unfinished)" if left else ""
            wall = np.mean([r["wall_s"] for r in rs])
            lines.append(
                f"| {label} | `{p}` | {jct / 3600:,.1f}{note} | {pre:,.0f} | "
                f"{jct / base:.3f} | {wall:,.1f} |"
            )
    return "\n".join(lines) + "\n"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--workers", type=int, default=2)
    ap.add_argument("--fresh", action="store_true", help="rerun the runs already in the CSV")
    ap.add_argument("--only", nargs="+", choices=list(SCENARIOS), help="these scenarios only")
    ap.add_argument("--out", type=Path, default=ROOT / "experiments/results/gandiva")
    a = ap.parse_args()
    a.out.mkdir(parents=True, exist_ok=True)
    csv_path = a.out / "switch_cost.csv"
    rows = [] if a.fresh else read_rows(csv_path)
    done = {(r["scenario"], r["policy"], r["seed"]) for r in rows}
    labels = a.only or list(SCENARIOS)
    cells = [  # the longest runs (the largest traces, listed last) first
        (label, p, seed)
        for label in reversed(labels)
        for seed in SCENARIOS[label][2]
        for p in POLICIES
        if (label, p, seed) not in done
    ]
    t0 = time.perf_counter()
    with ProcessPoolExecutor(a.workers) as pool:
        futures = [pool.submit(run, c) for c in cells]
        for fut in as_completed(futures):
            row = fut.result()
            rows.append(row)
            write_rows(csv_path, rows)  # keep what is done if the run is cut short
            done_s = f"{row['avg_jct_s'] / 3600:.1f} h, {row['wall_s']} s"
            print(
                f"{row['scenario']} {row['policy']} seed {row['seed']}: {done_s}", file=sys.stderr
            )
    print(f"{len(cells)} runs in {time.perf_counter() - t0:.0f} s", file=sys.stderr)
    command = "python experiments/reproductions/gandiva_switch_cost.py"
    text = table(rows, command, sum(r["wall_s"] for r in rows))
    print(text)
    (a.out / "switch_cost.md").write_text(text)


if __name__ == "__main__":
    main()

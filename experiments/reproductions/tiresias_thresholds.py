"""Tiresias's queue-threshold rules side by side on the Dally presets.

Rules (``baselines/tiresias.py``), each with the default two queues: ``history`` (default;
one queue until the first job finishes, then the authors' limit scaled by the finished jobs'
median GPU-service), ``online`` (the authors' limit until the first job finishes, then scaled
the same way), ``fixed`` (the authors' simulator: 3,250 GPU-s), and the clairvoyant
``scaled`` and ``quantiles`` (statistics of every job of the run, future arrivals included).
Prints and writes a markdown table of preemptions per job, makespan and average JCT, the
mean over seeds.

Usage: python experiments/reproductions/tiresias_thresholds.py [--seeds 1 2] [--workers 2]
       [--out DIR]
"""

from __future__ import annotations

import argparse
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path

import numpy as np
from tqdm import tqdm

from dlcluster_gym import simulate
from dlcluster_gym.scheduler import policy_kind

ROOT = Path(__file__).resolve().parents[2]
RULES = ("history", "online", "fixed", "scaled", "quantiles")
SCENARIOS = ("dally-batch-4rack", "dally-poisson-4rack")


def run(args: tuple[str, str, int]) -> tuple[str, str, int, dict]:
    scenario, rule, seed = args
    res = simulate(scenario, "tiresias", seed=seed, policy_params={"thresholds": rule})
    s = res.summary
    keep = ("preemptions", "jobs_total", "makespan_s", "avg_jct_s", "jobs_unfinished")
    return scenario, rule, seed, {k: s[k] for k in keep}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--seeds", type=int, nargs="+", default=[1, 2])
    ap.add_argument("--workers", type=int, default=2)
    ap.add_argument("--out", type=Path, default=ROOT / "experiments/results/tiresias")
    a = ap.parse_args()
    cells = [(sc, r, s) for sc in SCENARIOS for r in RULES for s in a.seeds]
    with ProcessPoolExecutor(a.workers) as pool:
        got = list(tqdm(pool.map(run, cells), total=len(cells), desc="tiresias rules"))
    lines = [
        "# Tiresias threshold rules",
        "",
        "`python experiments/reproductions/tiresias_thresholds.py "
        f"--seeds {' '.join(map(str, a.seeds))}`: "
        "mean over the seeds. Kind: `deployable` rules use only what a real scheduler "
        "observes; `clairvoyant` rules read every job's length, future arrivals included.",
        "",
        "| scenario | thresholds | kind | preemptions / job | makespan (h) | avg JCT (h) |",
        "|---|---|---|---:|---:|---:|",
    ]
    for sc in SCENARIOS:
        for r in RULES:
            rows = [m for (s2, r2, _, m) in got if s2 == sc and r2 == r]
            pre = np.mean([m["preemptions"] / m["jobs_total"] for m in rows])
            mk = np.mean([m["makespan_s"] for m in rows]) / 3600
            jct = np.mean([m["avg_jct_s"] for m in rows]) / 3600
            kind = policy_kind("tiresias", {"thresholds": r})
            lines.append(f"| {sc} | `{r}` | {kind} | {pre:.2f} | {mk:,.1f} | {jct:,.1f} |")
    text = "\n".join(lines) + "\n"
    print(text)
    a.out.mkdir(parents=True, exist_ok=True)
    (a.out / "thresholds.md").write_text(text)


if __name__ == "__main__":
    main()

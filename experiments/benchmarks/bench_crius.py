"""Crius speed benchmark: one scheduling decision on 1,280 GPUs with ~100 active
jobs in <= 20 ms on average, the whole crius-philly-1280gpu run in <= 5 minutes on one core.

Prints: workload build time, the whole Crius run (wall seconds), the number of decisions
that did work and their mean / p50 / p99 wall time, the mean for decisions with 50-150
active (running + waiting) jobs, and the parallelism-search cache sizes.

Usage: python experiments/benchmarks/bench_crius.py [--scenario crius-philly-1280gpu] [--max-jobs N]
"""

from __future__ import annotations

import argparse
import time

import numpy as np
from bench_out import markdown_copy  # a neighbour script

from dlcluster_gym.api import prepare
from dlcluster_gym.perf import parallelism as par
from dlcluster_gym.scheduler import make_policy
from dlcluster_gym.sim.engine import Engine

TARGET_DECISION_MS = 20.0
TARGET_RUN_S = 300.0


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--scenario", default="crius-philly-1280gpu")
    ap.add_argument("--max-jobs", type=int, default=None)
    ap.add_argument("--out", metavar="FILE", help="also write the output as a markdown page")
    args = ap.parse_args()
    with markdown_copy(args.out, "Crius on its 1,280-GPU cluster"):
        run(args)


def run(args: argparse.Namespace) -> None:
    """Time one Crius run and its decisions."""
    t0 = time.perf_counter()
    cfg, cluster, jobs, rng = prepare(args.scenario, None)
    if args.max_jobs:
        jobs = jobs[: args.max_jobs]
    load_s = time.perf_counter() - t0
    pol = make_policy("crius")
    eng = Engine(cfg, cluster, jobs, pol, rng)
    active: list[int] = []
    schedule = pol.schedule

    def timed(view):
        n = len(pol.decision_s)
        out = schedule(view)
        if len(pol.decision_s) > n:
            active.append(view.num_waiting + len(eng.running))
        return out

    pol.schedule = timed
    t1 = time.perf_counter()
    res = eng.run()
    run_s = time.perf_counter() - t1
    d = 1e3 * np.asarray(pol.decision_s)
    act = np.asarray(active)
    near = (act >= 50) & (act <= 150)
    m = res.summary
    print(f"scenario {args.scenario}: {len(jobs)} jobs, {cluster.num_gpus} GPUs")
    print(f"workload build          {load_s:8.1f} s")
    print(
        f"whole Crius run         {run_s:8.1f} s  (target <= {TARGET_RUN_S:.0f} s: "
        f"{'ok' if load_s + run_s <= TARGET_RUN_S else 'MISSED'})"
    )
    print(f"decisions that did work {d.size:8d}  of {m['sim_events']} events")
    print(f"decision mean           {d.mean():8.2f} ms  p50 {np.median(d):.2f}  p99 "
          f"{np.percentile(d, 99):.2f}  max {d.max():.1f}")  # fmt: skip
    if near.any():
        mean_near = d[near].mean()
        print(
            f"decision mean, 50-150 active jobs ({int(near.sum())} decisions) "
            f"{mean_near:.2f} ms (target <= {TARGET_DECISION_MS:.0f} ms: "
            f"{'ok' if mean_near <= TARGET_DECISION_MS else 'MISSED'})"
        )
    print(f"active jobs per decision: mean {act.mean():.0f}, max {act.max()}")
    print(
        f"plan caches: best_plan {par.best_plan.cache_info().currsize}, cell_estimate "
        f"{par.cell_estimate.cache_info().currsize}, stage tables "
        f"{par._stage_table.cache_info().currsize}"
    )
    print(f"completed {m['jobs_completed']}/{m['jobs_total']}, avg JCT {m['avg_jct_s']:.0f} s")


if __name__ == "__main__":
    main()

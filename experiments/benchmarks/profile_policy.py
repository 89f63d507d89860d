"""Profile one policy on one scenario with cProfile and print the top functions.

Usage: python experiments/benchmarks/profile_policy.py SCENARIO POLICY [--jobs N] [--top K]
       [--sort cumulative|tottime] [--contention] [--out FILE.prof]

``--jobs N`` replays only the first N jobs of the workload (in arrival order), so a slow
policy can be profiled on a prefix of a large trace in bounded time.
"""

from __future__ import annotations

import argparse
import cProfile
import pstats
import time

from dlcluster_gym.api import prepare
from dlcluster_gym.config import load_scenario
from dlcluster_gym.scheduler import make_policy
from dlcluster_gym.sim.engine import Engine


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("scenario")
    ap.add_argument("policy")
    ap.add_argument("--jobs", type=int, default=0, help="first N jobs only (0: all)")
    ap.add_argument("--top", type=int, default=25)
    ap.add_argument("--sort", default="tottime", choices=("tottime", "cumulative"))
    ap.add_argument("--contention", action="store_true", help="turn link contention on")
    ap.add_argument("--out", help="also write the raw profile here")
    args = ap.parse_args()
    spec: str | dict = args.scenario
    if args.contention:
        data = load_scenario(args.scenario).model_dump()
        data["contention"] = True
        spec = data
    cfg, cluster, jobs, rng = prepare(spec)
    if args.jobs:
        jobs = jobs[: args.jobs]
    engine = Engine(cfg, cluster, jobs, make_policy(args.policy), rng)
    prof = cProfile.Profile()
    t0 = time.perf_counter()
    prof.enable()
    res = engine.run()
    prof.disable()
    wall = time.perf_counter() - t0
    s = res.summary
    print(
        f"{args.scenario}:{args.policy} jobs={len(jobs)} wall={wall:.1f}s (profiled) "
        f"events={s['sim_events']} avg_jct={s['avg_jct_s']:.6g} preemptions={s['preemptions']}"
    )
    stats = pstats.Stats(prof)
    if args.out:
        stats.dump_stats(args.out)
    stats.strip_dirs().sort_stats(args.sort).print_stats(args.top)


if __name__ == "__main__":
    main()

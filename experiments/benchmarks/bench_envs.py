"""Environment speed benchmark: env steps per second with a given env policy, one core.

Targets, masked random play on ``dally-poisson-2rack`` in steps per CPU second: >= 5,000 for
the newest Scheduler env and >= 10,000 for the newest Placement env (the first two rows).
Each env runs at its newest version; a heuristic runs with the env arguments it declares
(``env_kwargs``, e.g. Scheduler-v0's dally: preemption).
Every row runs whole episodes (reset included) for ``--episodes`` seeds and reports steps
per wall-clock second, steps per CPU second of this process (the single-core figure, robust
to other load on the machine) and simulated jobs/s.

Usage: python experiments/benchmarks/bench_envs.py [--episodes N] [--json] [--out FILE]
       [--rows ENV[-vN]:SCENARIO:POLICY ...]   (ENV alone: its latest version)
"""

from __future__ import annotations

import argparse
import json
import time

import gymnasium as gym
from bench_out import markdown_copy  # a neighbour script

import dlcluster_gym  # noqa: F401  (registers the envs)
from dlcluster_gym.envs import latest
from dlcluster_gym.envs.policies import ENV_POLICIES, make_env_policy, rollout
from dlcluster_gym.scheduler import _import

DEFAULT_ROWS = (
    "Scheduler:dally-poisson-2rack:random",
    "Placement:dally-poisson-2rack:random",
    "Placement:dally-poisson-4rack:random",
    "Placement:dally-poisson-4rack:dally",
    "Placement:dally-batch-8rack:random",
    "DelayTimer:dally-poisson-4rack:random",
    "DelayTimer:dally-poisson-4rack:dally",
    "Scheduler:dally-poisson-8rack:random",
    "Scheduler:dally-poisson-4rack:random",
    "Scheduler-v2:dally-poisson-8rack:random",
    "Scheduler-v2:dally-poisson-8rack:dally",
    "Scheduler-v2:dally-poisson-8rack:srw-slots",
)


def bench(row: str, episodes: int) -> dict:
    """Episodes of ``ENV[-vN]:SCENARIO:POLICY`` (the latest version unless named)."""
    env_name, scenario, policy = row.split(":")
    kind, _, version = env_name.partition("-v")
    target = ENV_POLICIES[kind][policy][0]
    kw = dict(getattr(_import(target), "env_kwargs", {}))
    env = gym.make(f"DLCluster/{kind}-v{version or latest(kind)}", scenario=scenario, **kw)
    pol = make_env_policy(policy, env, **({"seed": 0} if policy == "random" else {}))
    steps = jobs = 0
    t0 = time.perf_counter()
    c0 = time.process_time()
    for seed in range(1, episodes + 1):
        info, _, n = rollout(env, pol, seed=seed)
        steps += n
        jobs += info["results"]["jobs_completed"]
    wall = time.perf_counter() - t0
    cpu = time.process_time() - c0
    return {
        "row": row,
        "episodes": episodes,
        "steps": steps,
        "wall_s": wall,
        "cpu_s": cpu,
        "steps_per_s": steps / wall,
        "steps_per_cpu_s": steps / cpu,
        "jobs_per_s": jobs / wall,
    }


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--episodes", type=int, default=3)
    ap.add_argument("--rows", nargs="*", default=list(DEFAULT_ROWS))
    ap.add_argument("--json", action="store_true", help="print JSON instead of a table")
    ap.add_argument("--out", metavar="FILE", help="also write the table as a markdown page")
    args = ap.parse_args()
    out = [bench(r, args.episodes) for r in args.rows]
    if args.json:
        print(json.dumps(out, indent=2))
        return
    with markdown_copy(args.out, "Environment speed"):
        print(
            f"# Whole episodes including resets ({args.episodes} per row), one core; steps/s "
            "over wall time, steps/CPU-s over CPU time."
        )
        print("| env : scenario : policy | steps | wall s | steps/s | steps/CPU-s | jobs/s |")
        print("|---|---:|---:|---:|---:|---:|")
        for r in out:
            print(
                f"| {r['row'].replace(':', ' : ')} | {r['steps']:,} | {r['wall_s']:.2f} | "
                f"{r['steps_per_s']:,.0f} | {r['steps_per_cpu_s']:,.0f} | {r['jobs_per_s']:,.0f} |"
            )


if __name__ == "__main__":
    main()

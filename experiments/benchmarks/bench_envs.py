"""Environment speed benchmark: env steps per second with a given env policy, one core.

Targets, masked random play on ``dally-poisson-2rack`` in steps per CPU second: >= 5,000 for
the newest Scheduler env and >= 10,000 for the newest Placement env (the first two rows).
Each env runs at its newest version; a heuristic runs with the env arguments it declares
(``env_kwargs``, e.g. Scheduler-v0's dally: preemption).
Every row first runs ``--warmup`` untimed episodes (seed 0: numba's cached kernels load and
the per-process caches of placement overheads fill, as they have early in a training run),
then whole episodes (reset included) for seeds 1..``--episodes``, and reports steps per
wall-clock second, steps per CPU second of this process (the single-core figure, robust to
other load on the machine) and simulated jobs/s.

``--repeat N`` times the same episodes N times (the policy seeded afresh each time) and
reports the median: on a shared machine single timings vary by 10 %.

Usage: python experiments/benchmarks/bench_envs.py [--episodes N] [--warmup N] [--repeat N]
       [--json] [--out FILE] [--rows ENV[-vN]:SCENARIO:POLICY ...]   (ENV alone: its latest
       version)
"""

from __future__ import annotations

import argparse
import json
import statistics
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


TARGETS = {
    "Scheduler:dally-poisson-2rack:random": 5000.0,
    "Placement:dally-poisson-2rack:random": 10000.0,
}
"""Steps per CPU second the newest Scheduler and Placement envs are to reach (masked random)."""


def bench(row: str, episodes: int, warmup: int = 1, repeat: int = 1) -> dict:
    """Episodes of ``ENV[-vN]:SCENARIO:POLICY`` (the latest version unless named), after
    ``warmup`` untimed ones; ``repeat`` times the same episodes (the policy seeded afresh
    each time), the median time of them reported."""
    env_name, scenario, policy = row.split(":")
    kind, _, version = env_name.partition("-v")
    target = ENV_POLICIES[kind][policy][0]
    kw = dict(getattr(_import(target), "env_kwargs", {}))
    env_id = f"{kind}-v{version or latest(kind)}"
    env = gym.make(f"DLCluster/{env_id}", scenario=scenario, **kw)
    seeded = {"seed": 0} if policy == "random" else {}
    pol = make_env_policy(policy, env, **seeded)
    for _ in range(warmup):
        rollout(env, pol, seed=0)
    walls, cpus = [], []
    for _ in range(repeat):
        pol = make_env_policy(policy, env, **seeded)
        steps = jobs = 0
        t0 = time.perf_counter()
        c0 = time.process_time()
        for seed in range(1, episodes + 1):
            info, _, n = rollout(env, pol, seed=seed)
            steps += n
            jobs += info["results"]["jobs_completed"]
        walls.append(time.perf_counter() - t0)
        cpus.append(time.process_time() - c0)
    wall, cpu = statistics.median(walls), statistics.median(cpus)
    return {
        "row": row,
        "env": env_id,
        "target": TARGETS.get(row),
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
    ap.add_argument("--warmup", type=int, default=1, help="untimed episodes first (seed 0)")
    ap.add_argument("--repeat", type=int, default=1, help="time the episodes N times: median")
    ap.add_argument("--rows", nargs="*", default=list(DEFAULT_ROWS))
    ap.add_argument("--json", action="store_true", help="print JSON instead of a table")
    ap.add_argument("--out", metavar="FILE", help="also write the table as a markdown page")
    args = ap.parse_args()
    out = [bench(r, args.episodes, args.warmup, args.repeat) for r in args.rows]
    if args.json:
        print(json.dumps(out, indent=2))
        return
    with markdown_copy(args.out, "Environment speed"):
        print(
            f"# Whole episodes including resets ({args.episodes} per row, after {args.warmup} "
            f"untimed; the median of {args.repeat} timings of the same episodes), one core; "
            "steps/s over wall time, steps/CPU-s over CPU time."
        )
        print("| env : scenario : policy | steps | wall s | steps/s | steps/CPU-s | jobs/s |")
        print("|---|---:|---:|---:|---:|---:|")
        for r in out:
            _, scenario, policy = r["row"].split(":")
            print(
                f"| {r['env']} : {scenario} : {policy} | {r['steps']:,} | {r['wall_s']:.2f} | "
                f"{r['steps_per_s']:,.0f} | {r['steps_per_cpu_s']:,.0f} | {r['jobs_per_s']:,.0f} |"
            )
        for r in out:
            if r["target"]:
                print(f"\n# {target_line(r['env'], r['steps_per_cpu_s'], r['target'])}")


def target_line(env: str, got: float, target: float) -> str:
    """Whether ``env`` reached ``target`` steps per CPU second, and by how much it missed."""
    if got >= target:
        return f"{env}: {got:,.0f} steps/CPU-s, target {target:,.0f}: met."
    return (
        f"{env}: {got:,.0f} steps/CPU-s, target {target:,.0f}: missed by "
        f"{target - got:,.0f} ({target / got:.2f}x faster needed)."
    )


if __name__ == "__main__":
    main()

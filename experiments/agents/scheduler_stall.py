"""Does stalling pay in Scheduler-v0 / v1? (the unfinished-job charge)

For each scenario and seed: the return of a policy that never starts anything (action 0 at
every step) in ``Scheduler-v0`` (7 days per unfinished job, stall ending truncated) and in
``Scheduler-v1`` (the serial bound per unfinished job, stall ending terminated), next to the
returns of ``random``, ``fcfs`` and ``dally`` played to the end (their returns are the same in
both versions: they finish every job). Env rollouts, default reward weights.

Usage: python experiments/agents/scheduler_stall.py [--seeds 101]
       [--scenarios dally-batch-2rack ...]
"""

from __future__ import annotations

import argparse
import time
import warnings

import gymnasium as gym

import dlcluster_gym  # noqa: F401  (registers the envs)
from dlcluster_gym.envs.policies import ENV_POLICIES, make_env_policy, rollout
from dlcluster_gym.scheduler import _import

SCENARIOS = ("dally-batch-2rack", "dally-batch-8rack", "dally-poisson-4rack")
POLICIES = ("random", "fcfs", "dally")


def always_stop(version: int, scenario: str, seed: int) -> tuple[float, bool, bool]:
    """(return, terminated, truncated) of never starting anything."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)  # v0 warns that v1 exists
        env = gym.make(f"DLCluster/Scheduler-v{version}", scenario=scenario)
    env.reset(seed=seed)
    total = 0.0
    while True:
        _, r, term, trunc, _ = env.step(0)
        total += float(r)
        if term or trunc:
            return total, term, trunc


def played(policy: str, scenario: str, seed: int) -> float:
    kw = dict(_import(ENV_POLICIES["Scheduler"][policy][0]).env_kwargs)
    env = gym.make("DLCluster/Scheduler-v1", scenario=scenario, **kw)
    pol = make_env_policy(policy, env, seed=0) if policy == "random" else None
    info, total, _ = rollout(env, pol or make_env_policy(policy, env), seed=seed)
    assert info["results"]["jobs_unfinished"] == 0
    return total


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--seeds", nargs="*", type=int, default=[101])
    ap.add_argument("--scenarios", nargs="*", default=list(SCENARIOS))
    args = ap.parse_args()
    t0, c0 = time.perf_counter(), time.process_time()
    print("| scenario | seed | never start, v0 | never start, v1 | " + " | ".join(POLICIES) + " |")
    print("|---|---:|---:|---:|" + "---:|" * len(POLICIES))
    for scenario in args.scenarios:
        for seed in args.seeds:
            v0, _, trunc0 = always_stop(0, scenario, seed)
            v1, term1, _ = always_stop(1, scenario, seed)
            assert trunc0 and term1
            cells = [f"{played(p, scenario, seed):,.0f}" for p in POLICIES]
            print(f"| {scenario} | {seed} | {v0:,.0f} | {v1:,.0f} | " + " | ".join(cells) + " |")
    print(
        f"\n{time.perf_counter() - t0:.0f} s wall, {time.process_time() - c0:.0f} s CPU; "
        "returns: sum of rewards, default weights (minus total JCT in hours plus charges)"
    )


if __name__ == "__main__":
    main()

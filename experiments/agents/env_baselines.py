"""Baseline returns and average JCTs per env and scenario: random, each heuristic and the
shipped agents acting in the Gymnasium envs (env rollouts, not native runs).

Each policy runs in the newest version of its env (Scheduler's slot-action heuristics and
agent: Scheduler-v2; its per-job policies, ``NAME@v3``: Scheduler-v3 with ``preemption=True``,
as in the from-scratch recipe) with the env arguments it declares (Scheduler-v0's heuristics:
their slot orders, windows and preemption; Placement heuristics: their own base policy), on
held-out seeds. The return is the sum of rewards with the default weights (``jct``: minus the
total JCT in hours, plus any penalties), so returns of one env and scenario are comparable.
Each row records the policy's kind: clairvoyant when it declares so or its env hands it job
lengths (``known_durations``), else deployable.

Usage: python experiments/agents/env_baselines.py [--seeds 101]
       [--out experiments/results/agents]
"""

from __future__ import annotations

import argparse
import json
import time
from pathlib import Path

import gymnasium as gym
import numpy as np

import dlcluster_gym  # noqa: F401  (registers the envs)
from dlcluster_gym.envs import latest
from dlcluster_gym.envs.policies import ENV_POLICIES, PER_JOB_POLICIES, make_env_policy, rollout
from dlcluster_gym.scheduler import _import, is_clairvoyant

ROOT = Path(__file__).resolve().parents[2]
SCENARIOS = ("dally-poisson-4rack", "dally-batch-2rack")
AGENTS = {
    "Placement": "agents/checkpoints/placement.zip",
    "DelayTimer": "agents/checkpoints/delay_timer.zip",
    "Scheduler": "agents/checkpoints/scheduler.zip",
}
POLICIES = {
    "Placement": ("random", "dally", "tiresias", "gandiva"),
    "DelayTimer": ("random", "dally", "dally-manual"),
    "Scheduler": (
        "random",
        "fcfs",
        "dally",
        "dally-relocate",
        "tiresias",
        "gandiva",
        "srw",
        "las-slots",
        *(f"{p}@v3" for p in PER_JOB_POLICIES),
    ),
}
SLOT_VERSION = 2
"""Scheduler's slot-action policies (``ENV_POLICIES``) and the shipped scheduler agent act in
Scheduler-v2, the newest version with slot actions; the per-job policies
(``PER_JOB_POLICIES``) act in Scheduler-v3."""


def version(kind: str, policy: str) -> int:
    """The env version a policy runs in: the newest, except Scheduler's slot-action
    policies and agents, which run in the newest slot-action version."""
    if kind == "Scheduler":
        return 3 if policy.endswith("@v3") else SLOT_VERSION
    return latest(kind)


def env_kwargs(kind: str, policy: str) -> dict:
    """The env arguments a policy needs (Placement: its base policy)."""
    if policy.startswith("agent:"):
        from dlcluster_gym.envs.agent_loader import agent_env_kwargs, read_agent_meta

        return agent_env_kwargs(read_agent_meta(policy[len("agent:") :]))
    if policy.endswith("@v3"):  # the env of the from-scratch recipe: preemption offered
        cls = _import(PER_JOB_POLICIES[policy.removesuffix("@v3")][0])
        return {**cls.env_kwargs, "preemption": True}  # random and greedy as las
    cls = _import(ENV_POLICIES[kind][policy][0])
    kw = dict(getattr(cls, "env_kwargs", {}))
    if kind == "Placement" and policy != "random":
        kw["base_policy"] = getattr(cls, "base_policy", "dally")
    return kw


def policy_kind(policy: str, pol: object, kwargs: dict) -> str:
    """Clairvoyant when the policy declares it, its env hands it job lengths
    (``known_durations``) or, for an agent, its checkpoint says so; else deployable."""
    from dlcluster_gym.leaderboard.suite import entrant_kind

    knows = is_clairvoyant(pol) or bool(kwargs.get("known_durations"))
    if policy.startswith("agent:"):
        knows = knows or entrant_kind(policy) == "clairvoyant"
    return "clairvoyant" if knows else "deployable"


def run(kind: str, scenario: str, policy: str, seed: int) -> dict:
    kwargs = env_kwargs(kind, policy)
    env = gym.make(f"DLCluster/{kind}-v{version(kind, policy)}", scenario=scenario, **kwargs)
    name = policy.removesuffix("@v3")
    pol = make_env_policy(name, env, **({"seed": seed} if name == "random" else {}))
    t0 = time.perf_counter()
    info, total, steps = rollout(env, pol, seed=seed)
    res = info["results"]
    # the version its kwargs make (an agent trained before a versioned change runs in the
    # newest id with that version's kwargs, e.g. the placement agent's done_jobs_of)
    return {"env": env.unwrapped.env_name, "scenario": scenario, "policy": name,
            "kind": policy_kind(policy, pol, kwargs), "seed": seed, "return": total,
            "steps": steps, "avg_jct_h": res["avg_jct_s"] / 3600,
            "unfinished": res.get("jobs_unfinished", 0),
            "wall_s": time.perf_counter() - t0}  # fmt: skip


def table(rows: list[dict]) -> str:
    """Markdown: per env, scenario and policy (marked when clairvoyant), the mean return,
    average JCT and steps over the seeds."""
    from dlcluster_gym.leaderboard.tables import legend, marked

    lines = ["| env | scenario | policy | return (mean) | avg JCT (h, mean) | steps |",
             "|---|---|---|---:|---:|---:|"]  # fmt: skip
    kinds = {r["policy"]: r.get("kind", "deployable") for r in rows}
    keys = list(dict.fromkeys((r["env"], r["scenario"], r["policy"]) for r in rows))
    for env, sc, p in keys:
        sub = [r for r in rows if (r["env"], r["scenario"], r["policy"]) == (env, sc, p)]
        ret = np.mean([r["return"] for r in sub])
        jct = np.mean([r["avg_jct_h"] for r in sub])
        steps = np.mean([r["steps"] for r in sub])
        unf = sum(r["unfinished"] for r in sub)
        tail = f", {unf} unfinished" if unf else ""
        name = marked(p, kinds[p])
        lines.append(f"| {env} | {sc} | {name} | {ret:,.0f} | {jct:.2f}{tail} | {steps:,.0f} |")
    note = legend(kinds.values(), ranking=False)
    return "\n".join(lines) + (f"\n\n{note}" if note else "")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--seeds", type=int, nargs="*", default=[101])
    ap.add_argument("--out", type=Path, default=ROOT / "experiments" / "results" / "agents")
    ap.add_argument("--kinds", nargs="*", default=list(POLICIES))
    args = ap.parse_args()
    rows = []
    t0 = time.perf_counter()
    for kind in args.kinds:
        pols = list(POLICIES[kind])
        if (ROOT / AGENTS[kind]).is_file():
            pols.append(f"agent:{AGENTS[kind]}")
        for sc in SCENARIOS:
            for p in pols:
                for seed in args.seeds:
                    rows.append(run(kind, sc, p, seed))
                    r = rows[-1]
                    print(f"{r['env']} {sc} {p} {seed}: {r['return']:.0f}, "
                          f"{r['avg_jct_h']:.2f} h", flush=True)  # fmt: skip
    args.out.mkdir(parents=True, exist_ok=True)
    wall = time.perf_counter() - t0
    (args.out / "env_baselines.json").write_text(json.dumps({"rows": rows, "wall_s": wall},
                                                            indent=1))  # fmt: skip
    md = table(rows)
    (args.out / "env_baselines.md").write_text(
        "# Baseline returns and average JCTs per env and scenario\n\n"
        f"`python experiments/agents/env_baselines.py` (seeds {args.seeds}; {wall:.0f} s). Return: "
        "sum of rewards with the default weights (minus total JCT in hours, plus penalties).\n\n"
        f"{md}\n"
    )
    print(md)


if __name__ == "__main__":
    main()

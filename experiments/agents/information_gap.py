"""How much of Themis's lead over the scheduler agent is knowing job lengths.

On the shipped scheduler agent's held-out scenarios and seeds (read from its checkpoint, as
``train_agents.py evaluate``), native runs of:

- the agent (non-clairvoyant: durations hidden) and its warm-start teacher ``las-slots``;
- Themis and Th+Cassini as the papers describe them (``lengths=known``: finish-time fairness
  counts each job's remaining iterations) and our two non-clairvoyant variants of each
  (``baselines/themis.py``): ``lengths=attained`` (remaining iterations estimated from
  iterations done) and ``lengths=history`` (the expected remaining work under the lengths of
  the jobs finished so far);
- the clairvoyant references ``srw`` (never preempts) and ``srw-slots`` (the Scheduler env's
  clairvoyant teacher, ``known_durations=True``), and Dally.

Every row records the kind of the policy that ran (deployable, clairvoyant or bound); the table
marks the clairvoyant ones, and the agent is compared with the best deployable heuristic, the
best clairvoyant one beside it. An explanation only: nothing here trains, tunes or selects an
agent, so the held-out set stays held out. Writes ``--out``.md/.json.

Usage: DLCLUSTER_TRACES=../shared/traces python experiments/agents/information_gap.py [--out PREFIX]
"""

from __future__ import annotations

import argparse
import json
import time
from pathlib import Path
from typing import Any

import dlcluster_gym  # noqa: F401  (registers the envs)
from dlcluster_gym.agents.config import AgentConfig
from dlcluster_gym.agents.evaluate import best_table, kinds_of, relative_score, run_set
from dlcluster_gym.envs.agent_loader import read_agent_meta
from dlcluster_gym.envs.native import QueuePolicyScheduler
from dlcluster_gym.envs.policies import make_env_policy
from dlcluster_gym.scheduler import make_policy

ROOT = Path(__file__).resolve().parents[2]
CHECKPOINT = "agents/checkpoints/scheduler.zip"
AGENT = "scheduler-agent"


def env_policy(name: str, env_kwargs: dict[str, Any]) -> Any:
    """A native scheduler running Scheduler-env policy ``name`` with ``env_kwargs``; with
    ``known_durations`` the env hands it job lengths, so it is clairvoyant (the scheduler
    declares that from its env kwargs)."""
    return QueuePolicyScheduler(
        lambda env: make_env_policy(name, env), env_kwargs=env_kwargs, name=name
    )


def policies(cfg: AgentConfig) -> dict[str, Any]:
    """Label -> policy name or scheduler factory."""
    kw = dict(cfg.env_kwargs)

    def themis(lengths: str) -> Any:
        return lambda: make_policy("themis", lengths=lengths)

    def cassini(lengths: str) -> Any:
        return lambda: make_policy("cassini", base_params={"lengths": lengths})

    return {
        AGENT: f"agent:{CHECKPOINT}",
        "las-slots": lambda: env_policy("las-slots", kw),
        "themis": "themis",
        "themis lengths=attained": themis("attained"),
        "themis lengths=history": themis("history"),
        "cassini": "cassini",
        "cassini lengths=attained": cassini("attained"),
        "cassini lengths=history": cassini("history"),
        "srw": "srw",
        "srw-slots": lambda: env_policy("srw-slots", {**kw, "known_durations": True}),
        "dally": "dally",
    }


def _mean(rows: list[dict[str, Any]], policy: str, key: str) -> float:
    vals = [r[key] for r in rows if r["policy"] == policy]
    return sum(vals) / len(vals)


def table(rows: list[dict[str, Any]]) -> str:
    """Markdown: per policy (with its kind) and scenario, the mean average JCT over the seeds
    with the mean of per-seed ratios to Dally's, then the mean P99 JCT over Dally's mean P99."""
    pols = list(dict.fromkeys(r["policy"] for r in rows))
    scenarios = list(dict.fromkeys(r["scenario"] for r in rows))
    kinds = kinds_of(rows)
    head = "| policy | kind | " + " | ".join(scenarios) + " | mean avg |"
    lines = [head, "|---|---|" + "---:|" * (len(scenarios) + 1)]
    for p in pols:
        cells = []
        for s in scenarios:
            sub = [r for r in rows if r["scenario"] == s]
            avg = _mean(sub, p, "avg_jct_s") / 3600
            p99 = _mean(sub, p, "p99_jct_s") / _mean(sub, "dally", "p99_jct_s")
            cells.append(f"{avg:.2f} h ({relative_score(sub, p, 'dally'):.3f}; P99 {p99:.2f})")
        mean = relative_score(rows, p, "dally")
        lines.append(f"| {p} | {kinds[p]} | " + " | ".join(cells) + f" | {mean:.3f} |")
    return "\n".join(lines)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", default="experiments/results/agents/information_gap")
    args = ap.parse_args()
    meta = read_agent_meta(ROOT / CHECKPOINT)
    cfg = AgentConfig.model_validate(meta["config"])
    held = cfg.evaluation
    t0 = time.perf_counter()
    rows = run_set(policies(cfg), held.scenarios, held.seeds, progress=print)
    wall = time.perf_counter() - t0
    md = table(rows)
    best = best_table(rows, [AGENT], "dally")
    out = ROOT / args.out
    out.with_suffix(".json").write_text(
        json.dumps({"checkpoint": CHECKPOINT, "seeds": list(held.seeds), "rows": rows,
                    "wall_s": wall}, indent=1)
    )  # fmt: skip
    out.with_suffix(".md").write_text(
        "# Held-out scenarios: who knows job lengths\n\n"
        f"`DLCLUSTER_TRACES=../shared/traces python experiments/agents/information_gap.py` "
        f"({wall:.0f} s wall); the scheduler agent's held-out scenarios, seeds "
        f"{list(held.seeds)}. Cells: mean average JCT over the seeds (mean of per-seed ratios "
        "to Dally's; mean P99 JCT over Dally's). Kind: deployable policies use what a real "
        "scheduler observes; clairvoyant ones read job lengths. An explanation of the missed "
        f"held-out targets, run after the agent shipped; it selects nothing.\n\n{md}\n\n"
        "The agent against the best deployable heuristic, the best clairvoyant one beside it "
        f"(average JCT, mean of per-seed ratios):\n\n{best}\n"
    )
    print(md)
    print(best)


if __name__ == "__main__":
    main()

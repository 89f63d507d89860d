"""Scheduler agents next to their teacher and the paper heuristics on a config's VALIDATION set.

Native engine runs (``agents.evaluate.run_set``, as the validation inside ``dlcluster train``)
of the scenarios and seeds of ``--config``'s ``validation`` block: each checkpoint given as
``LABEL=PATH``, the warm-start teacher (``las-slots``: the Scheduler env policy taking every
decision of the run, with the config's env kwargs) and Dally, Tiresias, Themis. The score is
the validation score of training: the mean over (scenario, seed) of the average JCT over
Dally's. P99 ratios are the mean P99 over seeds over Dally's (as the held-out targets table).
Each policy's kind (deployable, or clairvoyant: Themis reads job lengths) is shown, and each
agent is compared with the best deployable heuristic, the best clairvoyant one beside it.
Never the held-out seeds or scenarios. Writes ``--out``.md/.json.

Usage: python experiments/agents/scheduler_validation.py [--config FILE] [--agent LABEL=PATH ...]
       [--out PREFIX]
"""

from __future__ import annotations

import argparse
import json
import time
from pathlib import Path
from typing import Any

import dlcluster_gym  # noqa: F401  (registers the envs)
from dlcluster_gym.agents.config import AgentConfig, load_agent_config
from dlcluster_gym.agents.evaluate import best_table, kinds_of, relative_score, run_set
from dlcluster_gym.envs.native import QueuePolicyScheduler
from dlcluster_gym.envs.policies import make_env_policy

ROOT = Path(__file__).resolve().parents[2]
HEURISTICS = ("dally", "tiresias", "themis")
Row = dict[str, Any]


def teacher(cfg: AgentConfig) -> Any:
    """A fresh native scheduler of the config's warm-start teacher (an env policy)."""
    assert cfg.warm_start is not None
    name = cfg.warm_start.teacher
    return QueuePolicyScheduler(
        lambda env: make_env_policy(name, env), env_kwargs=dict(cfg.env_kwargs), name=name
    )


def policies(cfg: AgentConfig, agents: dict[str, str]) -> dict[str, Any]:
    """Label -> policy name or scheduler factory: the agents, the teacher, the heuristics."""
    out: dict[str, Any] = {label: f"agent:{path}" for label, path in agents.items()}
    if cfg.warm_start is not None:
        out[cfg.warm_start.teacher] = lambda: teacher(cfg)
    return {**out, **{h: h for h in HEURISTICS}}


def _p99_ratio(rows: list[Row], policy: str, reference: str) -> float:
    def mean(p: str) -> float:
        vals = [r["p99_jct_s"] for r in rows if r["policy"] == p]
        return sum(vals) / len(vals)

    return mean(policy) / mean(reference)


def table(rows: list[Row], reference: str) -> str:
    """Markdown: per policy, its kind, the avg-JCT and P99 ratios to ``reference`` per
    scenario, and the mean avg ratio (the validation score)."""
    pols = list(dict.fromkeys(r["policy"] for r in rows))
    scenarios = list(dict.fromkeys(r["scenario"] for r in rows))
    kinds = kinds_of(rows)
    head = "| policy | kind | " + " | ".join(f"{s} avg / P99" for s in scenarios) + " | score |"
    lines = [head, "|---|---|" + "---:|" * (len(scenarios) + 1)]
    for p in pols:
        cells = []
        for s in scenarios:
            sub = [r for r in rows if r["scenario"] == s]
            cells.append(
                f"{relative_score(sub, p, reference):.3f} / {_p99_ratio(sub, p, reference):.3f}"
            )
        score = relative_score(rows, p, reference)
        lines.append(f"| {p} | {kinds[p]} | " + " | ".join(cells) + f" | {score:.4f} |")
    return "\n".join(lines)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--config", default="configs/agents/scheduler-v6.yaml")
    ap.add_argument("--agent", action="append", default=[], help="LABEL=PATH (repeatable)")
    ap.add_argument("--out", default="experiments/results/agents/scheduler_v6_validation")
    args = ap.parse_args()
    cfg = load_agent_config(args.config)
    agents = dict(a.split("=", 1) for a in args.agent)
    v = cfg.validation
    t0 = time.perf_counter()
    rows = run_set(policies(cfg, agents), v.scenarios, v.seeds, progress=print)
    wall = time.perf_counter() - t0
    md = table(rows, v.reference)
    if agents:
        best = best_table(rows, list(agents), v.reference)
        md += (
            "\n\nEach agent against the best deployable heuristic, the best clairvoyant one "
            f"beside it (average JCT, mean of per-seed ratios):\n\n{best}"
        )
    out = ROOT / args.out
    out.with_suffix(".json").write_text(
        json.dumps({"config": args.config, "agents": agents, "seeds": list(v.seeds),
                    "rows": rows, "wall_s": wall}, indent=1)
    )  # fmt: skip
    out.with_suffix(".md").write_text(
        f"# Scheduler agents on the validation set of `{args.config}`\n\n"
        f"Seeds {list(v.seeds)}; `python experiments/agents/scheduler_validation.py "
        f"--config {args.config}"
        + "".join(f" --agent {k}={p}" for k, p in agents.items())
        + f"` ({wall:.0f} s wall). Cells: average JCT / {v.reference} (mean of per-seed "
        f"ratios) / P99 JCT / {v.reference} (ratio of seed means); score: mean avg ratio over "
        f"(scenario, seed), as the validation score of training.\n\n{md}\n"
    )
    print(md)


if __name__ == "__main__":
    main()

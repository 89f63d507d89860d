"""The room the delay-timer decision leaves, and how much of it the shipped delay-timer agent
closes.

On each scenario and seed, the timer room is 1 - C / D: D the lower average JCT of Dally
(auto-tuned timers) and Dally-manual (the paper's fixed 12 h + 12 h), C the lowest of a grid
of fixed timers (machine timer T, rack timer 2T, T in ``room.TIMER_GRID_H``) chosen after the
fact on that seed, a clairvoyant reference: no scheduler knows beforehand which fixed timer a
workload favours. The agent's fraction of the room closed is sum(D - A) / sum(D - C) over the
seeds (``room.fraction_closed``), A its average JCT, read from its evaluation page
(``--eval``; nothing of the agent is re-run).
The evaluation's own Dally runs must equal the ones here (same scenarios, seeds and code):
the script stops if they do not. Writes ``timers.md``, ``timers_table.md`` (the page without
its title, which docs/agents.md includes) and ``timers.json`` under ``--out``.

    python experiments/agents/timer_room.py --workers 2
"""

from __future__ import annotations

import argparse
import json
import math
import os
import shlex
import sys
import time
from pathlib import Path
from typing import Any

from room import pct_ci  # a neighbour script

from dlcluster_gym.leaderboard import room, tables

SCENARIOS = ("dally-timers-2rack-load07", "dally-timers-2rack-load11", "dally-timers-4rack-load11")
EVAL = Path("experiments/results/agents/delay_timer_binding/eval.json")
AGENT = "delay-timer"
OUT = Path("experiments/results/room")


def agent_jcts(ev: dict[str, Any], agent: str) -> dict[str, dict[int, float]]:
    """Scenario -> seed -> average JCT (s) of ``agent`` in an evaluation's rows."""
    out: dict[str, dict[int, float]] = {}
    for r in ev["rows"]:
        if r["policy"] == agent:
            value = math.inf if r.get("jobs_unfinished", 0) else float(r["avg_jct_s"])
            out.setdefault(r["scenario"], {})[int(r["seed"])] = value
    return out


def check_same_runs(ev: dict[str, Any], jcts: dict[str, Any], policy: str = "dally") -> int:
    """Raise SystemExit when the evaluation's ``policy`` runs differ from ours; the count
    of runs compared otherwise."""
    n = 0
    for r in ev["rows"]:
        if r["policy"] != policy or r["scenario"] not in jcts:
            continue
        ours = jcts[r["scenario"]].get(policy, {}).get(int(r["seed"]))
        if ours is None:
            continue
        if ours != float(r["avg_jct_s"]):
            raise SystemExit(
                f"{r['scenario']} seed {r['seed']}: {policy} gives {ours!r} s here and "
                f"{r['avg_jct_s']!r} s in {EVAL}; re-run the evaluation on this code first"
            )
        n += 1
    return n


def page(report: dict[str, Any]) -> str:
    grid = ", ".join(f"{h:g}" for h in report["grid_h"])
    lines = [
        "# The delay-timer room",
        "",
        f"Command: `{report['command']}` ({report['wall_s']:,.0f} s wall, {report['workers']} "
        f"worker(s) on {report['cores']} cores); the agent's runs from "
        f"`{report['eval']}` (its Dally runs equal ours on all {report['checked']} seeds).",
        "",
        "| scenario | seeds | best deployable | avg JCT | best fixed timer (after the fact) "
        "| avg JCT | room | verdict | agent | fraction of the room closed |",
        "|---|---:|---|---:|---|---:|---:|---|---:|---:|",
    ]
    for row, frac in zip(report["table"], report["fractions"], strict=True):
        agent = report["agent_avg_jct_s"].get(row["scenario"])
        lines.append(
            f"| `{row['scenario']}` | {len(row['seeds'])} | {row['best_deployable']} | "
            f"{row['best_deployable_avg_jct_s'] / 3600:.2f} h | {row['best_clairvoyant']} | "
            f"{row['best_clairvoyant_avg_jct_s'] / 3600:.2f} h | "
            f"{pct_ci(row['room'], row['room_ci'])} | {row['verdict']} | "
            f"{'n/a' if agent is None else f'{agent / 3600:.2f} h'} | "
            f"{pct_ci(frac['fraction'], frac['fraction_ci'])} |"
        )
    mean_room, n_room = report["mean_room"], report["scenarios_with_room"]
    lines += [
        "",
        f"Mean over the {n_room} scenario(s) with room: room {pct_ci(mean_room, math.nan)}, "
        f"fraction closed by `{report['agent']}` {pct_ci(report['mean_fraction'], math.nan)}. "
        f"Seeds {report['seeds_text']}.",
        "",
        "Room on a seed: 1 - C / D, D the lower average JCT of dally and dally-manual on that "
        f"seed, C the lowest of the fixed-timer grid (machine timer T, rack timer 2T, T in "
        f"{{{grid}}} h; `dally-manual` with those timers) on that seed, a clairvoyant "
        "reference. Fraction closed: sum(D - A) / sum(D - C) over the seeds, A the agent's "
        "average JCT (0: level with the best heuristic, 1: level with the best fixed timer "
        "chosen after the fact, above 1: better) ± half the width of its 95 % paired "
        "bootstrap interval over the seeds. Room: mean over seeds ± half-width of the 95 % "
        "Student-t confidence interval. 'no room': mean room below "
        f"{100 * room.NO_ROOM_BELOW:g} %, left out of the means.",
        "",
    ]
    return "\n".join(lines)


def summarize(report: dict[str, Any], ev: dict[str, Any]) -> dict[str, Any]:
    jcts = {sc: {} for sc in report["scenarios"]} | room.jcts_of(report["runs"])
    table = room.room_table(jcts, room.timer_reference(report["grid_h"]))
    agent = agent_jcts(ev, report["agent"])
    fractions = [room.fraction_closed(agent.get(r["scenario"], {}), r) for r in table]
    mean_room, n = room.mean_room(table)
    mean_fraction, _ = room.mean_fraction(fractions)
    texts = sorted({tables.seed_ranges(v) for v in report["seeds"].values()})
    agent_mean = {
        sc: sum(v.values()) / len(v) for sc, v in agent.items() if v and sc in report["scenarios"]
    }
    return {
        **report, "checked": check_same_runs(ev, jcts), "table": table,
        "fractions": fractions, "mean_room": mean_room, "scenarios_with_room": n,
        "mean_fraction": mean_fraction, "seeds_text": " and ".join(texts),
        "agent_avg_jct_s": agent_mean,
    }  # fmt: skip


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--eval", type=Path, default=EVAL, help="the agent's eval.json")
    ap.add_argument("--agent", default=AGENT, help="the agent's label in it")
    ap.add_argument("--workers", type=int, default=1, help="processes (default 1)")
    ap.add_argument("--out", type=Path, default=OUT, help="folder for timers.md/.json")
    ap.add_argument(
        "--render", action="store_true", help="rewrite the page from --out's timers.json"
    )
    args = ap.parse_args(argv)
    ev = json.loads(args.eval.read_text())
    if args.render:
        report = json.loads((args.out / "timers.json").read_text())
    else:
        seeds = {sc: list(ev["seeds"][sc]) for sc in SCENARIOS}
        started = time.perf_counter()
        _, rows = room.run_room(
            SCENARIOS, seeds, args.workers, policies=room.TIMER_DEPLOYABLE,
            entrants=room.timer_entrants(),
        )  # fmt: skip
        keep = ("scenario", "entrant", "policy", "seed", "status", "reason", "avg_jct_s",
                "jobs_unfinished", "cpu_s")  # fmt: skip
        report = {
            "command": shlex.join(
                ["python", "experiments/agents/timer_room.py", *(argv or sys.argv[1:])]
            ),
            "wall_s": time.perf_counter() - started, "workers": args.workers,
            "cores": os.cpu_count(), "scenarios": list(SCENARIOS), "seeds": seeds,
            "grid_h": list(room.TIMER_GRID_H), "eval": str(args.eval), "agent": args.agent,
            "runs": [{k: r.get(k) for k in keep} for r in rows],
        }  # fmt: skip
    full = summarize(report, ev)
    args.out.mkdir(parents=True, exist_ok=True)
    raw = {k: report[k] for k in report}
    (args.out / "timers.json").write_text(json.dumps(raw, indent=1))
    text = page(full)
    (args.out / "timers.md").write_text(text)
    (args.out / "timers_table.md").write_text(text.split("\n", 2)[2])  # docs include it
    print(page(full))


if __name__ == "__main__":
    main()

"""Train the shipped agents and evaluate them on their held-out sets.

Steps (each can be run alone):

  python experiments/agents/train_agents.py train     # dlcluster train, both agents -> runs/agents/
  python experiments/agents/train_agents.py ship      # best.zip -> agents/checkpoints/*.zip, curves
  python experiments/agents/train_agents.py evaluate  # held-out table -> results/agents/
  python experiments/agents/train_agents.py tables    # rewrite the Markdown tables from the JSON
  python experiments/agents/train_agents.py add-references  # srw/ideal rows into the other tables
  python experiments/agents/train_agents.py heldout    # all three agents, seeds 101-110, 95 % CIs

Add ``placement``, ``delay-timer`` or ``scheduler`` to act on one agent only.

``train`` runs exactly the commands recorded in the checkpoints (``TRAIN_COMMANDS``).
``evaluate`` runs the shipped checkpoints and Dally, Dally-manual, Tiresias, Gandiva, Themis,
Cassini (Th+Cassini), the clairvoyant ``srw`` reference and the ``ideal`` bound natively on
the config's evaluation scenarios and seeds (the trace scenario needs ../shared/traces and is
skipped without it).

``heldout`` runs ``dlcluster evaluate`` on the three shipped checkpoints side by side, on
their shared held-out scenarios with the ten held-out seeds 101-110 (never used in training
or selection): means with 95 % confidence intervals, "no decision" scenarios left out of the
aggregate, and a plot (``experiments/results/agents/heldout/``; the page's header records the
command, the machine, the wall time and the training wall times).
"""

from __future__ import annotations

import json
import os
import shlex
import shutil
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
RESULTS = ROOT / "experiments" / "results" / "agents"
CHECKPOINTS = ROOT / "agents" / "checkpoints"
AGENTS = {"placement": "placement", "delay-timer": "delay_timer", "scheduler": "scheduler"}
TRAIN_COMMANDS = {
    "placement": "dlcluster train --agent placement --out runs/agents/placement-v10",
    "delay-timer": "dlcluster train --agent delay-timer --out runs/agents/delay-timer-v4",
    "scheduler": "dlcluster train --agent scheduler --config configs/agents/scheduler-v6.yaml "
    "--out runs/agents/scheduler-v6",
}
# The paper heuristics, then the headroom: `srw` (clairvoyant shortest remaining work, strict
# consolidation) and the `ideal` bound (every job alone on the cluster).
BASELINES = ("dally", "dally-manual", "tiresias", "gandiva", "themis", "cassini", "srw", "ideal")


def train() -> None:
    for cmd in TRAIN_COMMANDS.values():
        print(f"$ {cmd}", flush=True)
        subprocess.run([*shlex.split(cmd), "--quiet"], cwd=ROOT, check=True)


def ship() -> None:
    RESULTS.mkdir(parents=True, exist_ok=True)
    for agent, name in AGENTS.items():
        args = shlex.split(TRAIN_COMMANDS[agent])
        run = ROOT / args[args.index("--out") + 1]
        shutil.copyfile(run / "best.zip", CHECKPOINTS / f"{name}.zip")
        for f in ("curve.png", "curve.csv"):
            shutil.copyfile(run / f, RESULTS / f"{name}_{f}")
        summary = json.loads((run / "train_summary.json").read_text())
        (RESULTS / f"{name}_train_summary.json").write_text(json.dumps(summary, indent=1))
        print(f"shipped {CHECKPOINTS / f'{name}.zip'}")


def sim_tree() -> str | None:
    """Git tree hashes of the code a baseline run depends on (the simulator, the baselines,
    the scenario configs), or None when that code has uncommitted changes: two evaluations
    with the same value ran the same baselines on the same code."""
    paths = [
        "dlcluster_gym",
        "baselines",
        *(f"configs/{d}" for d in ("clusters", "profiles", "scenarios")),
    ]
    git = ["git", "-C", str(ROOT)]
    dirty = subprocess.run([*git, "status", "--porcelain", "--", *paths],
                           capture_output=True, text=True)  # fmt: skip
    if dirty.returncode or dirty.stdout.strip():
        return None
    out = subprocess.run([*git, "rev-parse", *(f"HEAD:{p}" for p in paths)],
                         capture_output=True, text=True)  # fmt: skip
    return out.stdout.replace("\n", " ").strip() if out.returncode == 0 else None


def _reusable_rows(tree: str | None) -> dict[tuple[str, int, str], dict]:
    """Baseline rows of earlier evaluations made on the same code (``sim_tree``), keyed by
    (scenario spec, seed, policy): deterministic runs, so they need not be simulated again."""
    out: dict[tuple[str, int, str], dict] = {}
    if tree is None:
        return out
    for f in sorted(RESULTS.glob("*_eval.json")):
        d = json.loads(f.read_text())
        if d.get("sim_tree") != tree:
            continue
        specs = d.get("specs", {})
        for r in d["rows"]:
            if r["policy"] in BASELINES and r["scenario"] in specs:
                out[(specs[r["scenario"]], r["seed"], r["policy"])] = r
    return out


def evaluate() -> None:
    from dlcluster_gym.agents.config import AgentConfig
    from dlcluster_gym.agents.evaluate import available, run_set, summary_table
    from dlcluster_gym.envs.agent_loader import read_agent_meta

    RESULTS.mkdir(parents=True, exist_ok=True)
    tree = sim_tree()
    cache = _reusable_rows(tree)
    for agent, name in AGENTS.items():
        path = CHECKPOINTS / f"{name}.zip"
        meta = read_agent_meta(path)
        held = AgentConfig.model_validate(meta["config"]).evaluation
        label = f"{agent}-agent"
        specs = {s.name: json.dumps(s.model_dump(), sort_keys=True) for s in held.scenarios}
        t0 = time.perf_counter()
        rows = []
        for spec in available(held.scenarios)[0]:
            for seed in held.seeds:
                pols = {label: f"agent:{path.relative_to(ROOT)}"}
                got = {b: cache.get((specs[spec.name], int(seed), b)) for b in BASELINES}
                pols.update({b: b for b, r in got.items() if r is None})
                new = run_set(pols, [spec], [seed], progress=print)
                for r in new:
                    cache[(specs[spec.name], int(seed), r["policy"])] = r
                rows += new + [dict(r, scenario=spec.name) for r in got.values() if r]
                print(f"{spec.name} seed {seed}: reused {sum(r is not None for r in got.values())}"
                      " baseline rows", flush=True)  # fmt: skip
        table = summary_table(rows, "dally")
        (RESULTS / f"{name}_eval.json").write_text(
            json.dumps({"checkpoint": str(path.relative_to(ROOT)), "command": meta["command"],
                        "seeds": list(held.seeds), "rows": rows, "summary": table,
                        "specs": specs, "sim_tree": tree,
                        "wall_s": time.perf_counter() - t0}, indent=1)
        )  # fmt: skip
    tables()


HELDOUT_SEEDS = "101-110"


def heldout() -> None:
    """The three shipped agents side by side on their held-out set, seeds 101-110."""
    sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "benchmarks"))
    from bench_out import _machine

    out = RESULTS / "heldout"
    cmd = ["dlcluster", "evaluate",
           *(f"--agent={a}={(CHECKPOINTS / f'{n}.zip').relative_to(ROOT)}"
             for a, n in AGENTS.items()),
           "--seeds", HELDOUT_SEEDS, "--out", str(out.relative_to(ROOT))]  # fmt: skip
    started = time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime())
    load0, t0 = os.getloadavg()[0], time.perf_counter()
    print(f"$ {shlex.join(cmd)}", flush=True)
    subprocess.run(cmd, cwd=ROOT, check=True)
    wall = time.perf_counter() - t0
    trained = "; ".join(f"{a}{_training_wall(n)}" for a, n in AGENTS.items())
    page = out / "eval.md"
    title, _, rest = page.read_text().partition("\n")
    head = (f"Written by `python experiments/agents/train_agents.py heldout` (`{shlex.join(cmd)}`) "
            f"on {started}: {_machine()}; {wall:.0f} s wall; load average {load0:.1f} at the "
            f"start, {os.getloadavg()[0]:.1f} at the end. Training: {trained}.")  # fmt: skip
    page.write_text(f"{title}\n\n{head}\n{rest}")


def _training_wall(name: str) -> str:
    """`` (N s of training, M s of it the warm start)`` from the shipped training summary."""
    path = RESULTS / f"{name}_train_summary.json"
    if not path.exists():
        return ""
    d = json.loads(path.read_text())
    warm = (
        (d.get("warm_start") or {}).get("wall_s") if isinstance(d.get("warm_start"), dict) else None
    )
    extra = f", {warm:.0f} s of it the warm start" if warm else ""
    return f" ({d['wall_s']:.0f} s of training{extra}, `{name}_train_summary.json`)"


PAPER = ("dally", "dally-manual", "tiresias", "gandiva", "themis", "cassini")
HEURISTICS = (*PAPER, "srw")  # what "the best heuristic" is chosen from, by kind


def _mean(rows: list[dict], pol: str, key: str) -> float:
    v = [r[key] for r in rows if r["policy"] == pol and key in r]
    return sum(v) / len(v) if v else float("nan")


def _best(rows: list[dict], kind: str) -> str | None:
    """The heuristic of ``kind`` with the lowest mean average JCT on ``rows``."""
    cands = [
        p
        for p in HEURISTICS
        if any(r["policy"] == p and r.get("kind") == kind for r in rows)
        and _mean(rows, p, "avg_jct_s") == _mean(rows, p, "avg_jct_s")  # not NaN
    ]
    return min(cands, key=lambda p: _mean(rows, p, "avg_jct_s")) if cands else None


def _targets(rows: list[dict], agent: str) -> tuple[float, float, str, float, str, float]:
    """On ``rows`` (one scenario, one or all seeds; means over seeds): the agent's average JCT
    over Dally's, over the best deployable heuristic's (the best heuristic; and which) and over
    the best clairvoyant one's (and which), its P99 over Dally's."""
    a = _mean(rows, agent, "avg_jct_s")
    dep, cv = _best(rows, "deployable"), _best(rows, "clairvoyant")
    nan = float("nan")
    return (a / _mean(rows, "dally", "avg_jct_s"),
            a / _mean(rows, dep, "avg_jct_s") if dep else nan, dep or "none",
            a / _mean(rows, cv, "avg_jct_s") if cv else nan, cv or "none",
            _mean(rows, agent, "p99_jct_s") / _mean(rows, "dally", "p99_jct_s"))  # fmt: skip


def targets_table(rows: list[dict], agent: str) -> str:
    """The held-out targets per scenario (means over seeds): the agent's average JCT against
    Dally's and the best deployable heuristic's (the best clairvoyant one's beside it), its
    P99 JCT against Dally's. ``rows`` carry kinds (:func:`with_kinds`)."""
    lines = ["| scenario | avg JCT / Dally (<= 0.85) | / best heuristic, deployable (< 1; which) | "
             "/ best clairvoyant heuristic (which) | P99 JCT / Dally (<= 1.10) | "
             "srw (clairvoyant) / Dally | ideal (bound) / Dally |",
             "|---|---:|---:|---:|---:|---:|---:|"]  # fmt: skip
    for sc in dict.fromkeys(r["scenario"] for r in rows):
        sub = [r for r in rows if r["scenario"] == sc]
        vs_d, vs_dep, dep, vs_cv, cv, p99 = _targets(sub, agent)
        d = _mean(sub, "dally", "avg_jct_s")
        lines.append(f"| {sc} | {vs_d:.3f} | {vs_dep:.3f} ({dep}) | {vs_cv:.3f} ({cv}) | "
                     f"{p99:.3f} | {_mean(sub, 'srw', 'avg_jct_s') / d:.3f} | "
                     f"{_mean(sub, 'ideal', 'avg_jct_s') / d:.3f} |")  # fmt: skip
    return "\n".join(lines)


def per_seed_table(rows: list[dict], agent: str) -> str:
    """The held-out targets per (scenario, seed): the means of ``targets_table`` can hide a
    seed that misses."""
    lines = [
        "| scenario | seed | avg JCT / Dally | / best heuristic, deployable (which) | "
        "/ best clairvoyant heuristic (which) | P99 JCT / Dally |",
        "|---|---:|---:|---:|---:|---:|",
    ]
    cases = dict.fromkeys((r["scenario"], r["seed"]) for r in rows if r["policy"] == agent)
    for sc, seed in cases:
        sub = [r for r in rows if r["scenario"] == sc and r["seed"] == seed]
        vs_d, vs_dep, dep, vs_cv, cv, p99 = _targets(sub, agent)
        lines.append(f"| {sc} | {seed} | {vs_d:.3f} | {vs_dep:.3f} ({dep}) | "
                     f"{vs_cv:.3f} ({cv}) | {p99:.3f} |")  # fmt: skip
    return "\n".join(lines)


def with_kinds(rows: list[dict], agent: str, checkpoint: str) -> list[dict]:
    """``rows`` with each policy's kind: as recorded, else the agent checkpoint's for the
    agent's label and the registered policy's for the others (rows of evaluations made
    before kinds were recorded)."""
    from dlcluster_gym.agents.evaluate import kinds_of
    from dlcluster_gym.leaderboard.suite import entrant_kind

    kinds = kinds_of(rows, {agent: entrant_kind(f"agent:{ROOT / checkpoint}")})
    return [dict(r, kind=r.get("kind") or kinds[r["policy"]]) for r in rows]


def add_references() -> None:
    """Copy the ``srw`` and ``ideal`` rows of the scheduler agent's evaluation into the other
    agents' evaluations: the same scenarios and seeds, and neither depends on the agent (the
    runs are deterministic), so they need not be simulated again."""
    src = json.loads((RESULTS / "scheduler_eval.json").read_text())
    refs = [r for r in src["rows"] if r["policy"] in ("srw", "ideal")]
    for name in ("placement", "delay_timer"):
        f = RESULTS / f"{name}_eval.json"
        d = json.loads(f.read_text())
        cases = {(r["scenario"], r["seed"]) for r in d["rows"]}
        add = [r for r in refs if (r["scenario"], r["seed"]) in cases]
        d["rows"] = [r for r in d["rows"] if r["policy"] not in ("srw", "ideal")] + add
        d["references_from"] = "scheduler_eval.json (srw, ideal rows)"
        f.write_text(json.dumps(d, indent=1))


def tables() -> None:
    """Rewrite the Markdown tables from the evaluation JSON (no simulation)."""
    from dlcluster_gym.agents.evaluate import (
        makespan_table,
        markdown_table,
        p99_table,
        summary_table,
    )

    for agent, name in AGENTS.items():
        d = json.loads((RESULTS / f"{name}_eval.json").read_text())
        d["rows"] = with_kinds(d["rows"], f"{agent}-agent", d["checkpoint"])
        table = summary_table(d["rows"], "dally")
        md = markdown_table(table, "dally")
        wall = f"; evaluation {d['wall_s']:.0f} s" if "wall_s" in d else ""
        (RESULTS / f"{name}_eval.md").write_text(
            f"# {agent} agent, held-out evaluation (ratio to Dally)\n\n"
            f"Checkpoint `{d['checkpoint']}`, trained with `{d['command']}`"
            f"{_training_wall(name)}; seeds {d['seeds']}{wall}.\n\nAverage JCT:\n\n{md}\n\n"
            f"P99 JCT:\n\n{p99_table(table, 'dally')}\n\n"
            f"Makespan:\n\n{makespan_table(table, 'dally')}\n"
            + (f"\nHeld-out targets:\n\n{targets_table(d['rows'], f'{agent}-agent')}\n"
               f"\nPer seed:\n\n{per_seed_table(d['rows'], f'{agent}-agent')}\n"
               if any("p99_jct_s" in r and r["policy"] == f"{agent}-agent" for r in d["rows"])
               else "")
        )  # fmt: skip
        print(md)


if __name__ == "__main__":
    args = sys.argv[1:]
    only = [a for a in args if a in AGENTS]  # e.g. `evaluate placement`: that agent only
    if only:
        AGENTS = {a: AGENTS[a] for a in only}
        TRAIN_COMMANDS = {a: TRAIN_COMMANDS[a] for a in only}
    steps = {"train": train, "ship": ship, "evaluate": evaluate, "tables": tables,
             "add-references": add_references, "heldout": heldout}  # fmt: skip
    chosen = [a for a in args if a not in AGENTS] or ["train", "ship", "evaluate"]
    bad = [a for a in chosen if a not in steps]
    if bad:
        print(__doc__)
        sys.exit(0 if set(bad) <= {"-h", "--help"} else f"unknown step(s): {', '.join(bad)}")
    for step in chosen:
        steps[step]()

"""Warm-start teachers for the Scheduler-v0 agent, measured on VALIDATION seeds only.

Each policy acts in ``DLCluster/Scheduler-v0`` (env rollouts) with the env arguments it declares
(the teachers: 16 waiting and 16 running slots as the agent's config). Scenarios and seeds are
the validation set of ``configs/agents/scheduler.yaml`` (training-sized clusters, seeds
501-502), never the held-out seeds (101-103) or the held-out scenarios. The ``las-slots``
margin and the ``gittins-slots`` variants were chosen here; the held-out table is measured once,
with the final checkpoint, by ``dlcluster evaluate``.

``--set guards`` measures the starvation guards of ``IndexSlots`` (``promote_knob``,
``max_wait_h``, ``wait_ratio``, ``protected_preempts``, ``max_preemptions``) added to the
``las-slots`` teacher of the shipped agent, next to the heuristics and the shipped agent
itself, on the same validation seeds plus a validation trace (``VAL_TRACE``: ITP cluster06,
a trace the held-out set does not use; needs the traces, skipped without them), and writes
``teachers_guards.md``/``.json``. The question it answers: does a guard lower the P99 JCT
(the held-out ITP trace's miss) without raising the mean JCT ratio, i.e. is a clone of it
worth training as agent v5?

``--set combos`` (follow-up, same validation set) crosses ``max_preemptions`` with the wait
caps and adds the clairvoyant ``srw-slots`` as a reference: if even a policy that knows every
job's remaining work misses the trace's P99, the P99 and average targets pull apart on it.

Usage: python experiments/agents/scheduler_teachers.py [--set default|guards|combos] [--workers N]
       [--out DIR]
"""

from __future__ import annotations

import argparse
import json
import time
from concurrent.futures import ProcessPoolExecutor
from contextlib import nullcontext
from pathlib import Path
from typing import Any

import gymnasium as gym
import numpy as np

import dlcluster_gym  # noqa: F401  (registers the envs)
from dlcluster_gym.agents.config import ScenarioSpec, load_agent_config
from dlcluster_gym.agents.envs import available
from dlcluster_gym.envs.agent_loader import agent_env_kwargs, load_agent_policy, read_agent_meta
from dlcluster_gym.envs.policies import ENV_POLICIES, make_env_policy, rollout
from dlcluster_gym.scheduler import _import

ROOT = Path(__file__).resolve().parents[2]
SLOTS = {"max_waiting": 16, "max_running": 16}
# (label, env policy, its parameters)
POLICIES: tuple[tuple[str, str, dict[str, Any]], ...] = (
    ("dally", "dally", {}),
    ("tiresias", "tiresias", {}),
    ("gandiva", "gandiva", {}),
    ("srw-slots (clairvoyant)", "srw-slots", {}),
    *((f"las-slots margin {m:g} GPU-h", "las-slots", {"margin": m}) for m in (0.25, 1, 4, 16, 64)),
    *((f"gittins-slots margin {m:g}", "gittins-slots", {"margin": m}) for m in (0.25, 1, 3)),
)

AGENT = ROOT / "agents/checkpoints/scheduler.zip"
GUARDS: tuple[tuple[str, str, dict[str, Any]], ...] = (
    ("dally", "dally", {}),
    ("tiresias", "tiresias", {}),
    ("gandiva", "gandiva", {}),
    ("scheduler-agent (shipped)", "agent", {}),
    ("las-slots (its teacher)", "las-slots", {}),
    *((f"+ Tiresias promotion knob {k:g}", "las-slots", {"promote_knob": k}) for k in (1, 2, 4)),
    *((f"+ wait cap {h:g} h", "las-slots", {"max_wait_h": h}) for h in (6, 12, 24)),
    *((f"+ wait cap {h:g} h, no preempting", "las-slots",
       {"max_wait_h": h, "protected_preempts": False}) for h in (6, 12, 24)),
    *((f"+ wait cap {h:g} h + {r:g} x run", "las-slots", {"max_wait_h": h, "wait_ratio": r})
      for h, r in ((1, 0.5), (2, 0.25), (6, 0.1))),
    *((f"+ wait cap {h:g} h after the first start", "las-slots",
       {"max_wait_h": h, "wait_from": "first_start"}) for h in (6, 12, 24)),
    *((f"+ at most {n} preemptions", "las-slots", {"max_preemptions": n}) for n in (1, 3)),
)  # fmt: skip
COMBOS: tuple[tuple[str, str, dict[str, Any]], ...] = (
    *GUARDS[:3],
    ("srw-slots (clairvoyant)", "srw-slots", {}),
    GUARDS[4],
    *((f"+ at most {n} preemptions{name}", "las-slots", {"max_preemptions": n, **cap})
      for n in (2, 3, 5, 8)
      for name, cap in (
          ("", {}),
          (", wait cap 12 h after the first start", {"max_wait_h": 12, "wait_from": "first_start"}),
          (", wait cap 24 h after the first start", {"max_wait_h": 24, "wait_from": "first_start"}),
          (", wait cap 12 h, no preempting", {"max_wait_h": 12, "protected_preempts": False}),
          (", wait cap 24 h, no preempting", {"max_wait_h": 24, "protected_preempts": False}),
      )),
)  # fmt: skip
VAL_TRACE = ScenarioSpec(
    scenario="itp-cluster06",
    label="val-trace-itp06-l0.9",
    requires_traces=True,
    overrides={"workload": {"target_load": 0.9, "max_jobs": 800}},
)


PAPER_HEURISTICS = ("dally", "tiresias", "gandiva")
TARGETS = (
    "The targets, applied to the validation set (fixed before the combos were run): mean "
    "avg ratio <= 0.85, avg JCT below Dally, Tiresias and Gandiva on every scenario (the paper "
    "heuristics that act in Scheduler-v0; Themis and Cassini run only natively), and the "
    "largest P99 ratio <= 1.10."
)


def _ratio(rows: list[dict[str, Any]], ref: dict, policy: str, scenario: str) -> float:
    """Mean over seeds of ``policy``'s avg JCT over Dally's on ``scenario``."""
    mine = [r for r in rows if r["policy"] == policy and r["scenario"] == scenario]
    return float(np.mean([r["avg_jct_h"] / ref[scenario, r["seed"]] for r in mine]))


def run(label: str, name: str, params: dict[str, Any], spec: Any, seed: int) -> dict[str, Any]:
    if name == "agent":
        kw = agent_env_kwargs(read_agent_meta(AGENT))
    else:
        kw = dict(_import(ENV_POLICIES["Scheduler"][name][0]).env_kwargs)
    if name.endswith("-slots"):
        kw.update(SLOTS)
    env = gym.make(
        "DLCluster/Scheduler-v0", scenario=spec.scenario, scenario_overrides=spec.overrides, **kw
    )
    t0 = time.process_time()
    pol = load_agent_policy(AGENT, env) if name == "agent" else make_env_policy(name, env, **params)
    info, _, steps = rollout(env, pol, seed=seed)
    r = info["results"]
    return {
        "scenario": spec.name, "seed": seed, "policy": label, "avg_jct_h": r["avg_jct_s"] / 3600,
        "p99_jct_h": r["p99_jct_s"] / 3600, "makespan_h": r["makespan_s"] / 3600,
        "preemptions": int(r["preemptions"]), "unfinished": int(r["jobs_unfinished"]),
        "steps": steps, "cpu_s": time.process_time() - t0,
    }  # fmt: skip


def _run(task: tuple) -> dict[str, Any]:
    return run(*task)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--set", choices=("default", "guards", "combos"), default="default")
    ap.add_argument(
        "--workers", type=int, default=1, help="processes (results do not depend on it)"
    )
    ap.add_argument("--out", type=Path, default=ROOT / "experiments/results/agents")
    args = ap.parse_args()
    cfg = load_agent_config(ROOT / "configs/agents/scheduler.yaml")
    val = cfg.validation
    policies, stem, specs = POLICIES, "teachers", list(val.scenarios)
    if args.set in ("guards", "combos"):
        policies, stem = (GUARDS, "teachers_guards") if args.set == "guards" else (
            COMBOS, "teachers_combos")  # fmt: skip
        specs = available([*specs, VAL_TRACE])[0]
    tasks = [(*p, spec, int(seed)) for spec in specs for p in policies for seed in val.seeds]
    rows = []
    with ProcessPoolExecutor(args.workers) if args.workers > 1 else nullcontext() as pool:
        for row in pool.map(_run, tasks) if pool else map(_run, tasks):  # rows in task order
            rows.append(row)
            print(json.dumps(row), flush=True)
    ref = {(r["scenario"], r["seed"]): r["avg_jct_h"] for r in rows if r["policy"] == "dally"}
    ref99 = {(r["scenario"], r["seed"]): r["p99_jct_h"] for r in rows if r["policy"] == "dally"}
    scen = [s.name for s in specs]
    check = args.set == "combos"
    cmd = "python experiments/agents/scheduler_teachers.py" + (
        f" --set {args.set}" if args.set != "default" else ""
    )
    lines = [
        f"# Scheduler-v0 warm-start teachers on validation seeds {', '.join(map(str, val.seeds))}",
        "",
        f"`{cmd}` (env rollouts; ratio = mean over seeds of avg "
        "JCT / Dally's avg JCT; P99 likewise; preemptions: total over the seeds).",
        "",
        "| policy | " + " | ".join(f"{s} avg / P99 (preempt.)" for s in scen)
        + " | mean avg | max P99 |" + (" targets |" if check else ""),
        "|---|" + "---:|" * (len(scen) + 2) + ("---|" if check else ""),
    ]  # fmt: skip
    heur = {s: min(_ratio(rows, ref, h, s) for h in PAPER_HEURISTICS) for s in scen}
    for label, _, _ in policies:
        cells, means, p99s = [], [], []
        for s in scen:
            mine = [r for r in rows if r["policy"] == label and r["scenario"] == s]
            a = _ratio(rows, ref, label, s)
            p = float(np.mean([r["p99_jct_h"] / ref99[s, r["seed"]] for r in mine]))
            n = sum(r["preemptions"] for r in mine)
            bad = sum(r["unfinished"] for r in mine)
            cells.append(f"{a:.3f} / {p:.3f} ({n:,})" + (f" {bad} unfinished" if bad else ""))
            means.append(a)
            p99s.append(p)
        row = f"| {label} | " + " | ".join(cells) + f" | {np.mean(means):.3f} | {max(p99s):.3f} |"
        if check:
            ok = np.mean(means) <= 0.85 and max(p99s) <= 1.10
            ok = ok and all(a < heur[s] for a, s in zip(means, scen, strict=True))
            row += " meets |" if ok else " misses |"
        lines.append(row)
    if check:
        lines += ["", TARGETS]
    args.out.mkdir(parents=True, exist_ok=True)
    (args.out / f"{stem}.md").write_text("\n".join(lines) + "\n")
    (args.out / f"{stem}.json").write_text(json.dumps(rows, indent=1) + "\n")
    print("\n".join(lines))


if __name__ == "__main__":
    main()

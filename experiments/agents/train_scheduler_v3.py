"""The Scheduler-v3 agent with a warm start: clone the ``las`` teacher (least attained
service first, best-tier starts, preemption by a 4 GPU-hour margin), then the from-scratch
recipe's PPO (``examples/train_from_scratch.py``: same envs, settings and steps), and evaluate
it held out against its teacher and every heuristic.

The teacher is recorded on 40 training episodes (seeds 1000-1039, the recipe's training
distribution) and cloned for 20 epochs; PPO then draws episode seeds from [2000, 2**31 - 1).
No checkpoint is selected: the last model is the agent. The held-out set is
``learn_from_scratch.py``'s (scenarios larger than any trained on, seeds 201-210); the
heuristics' rows are reused from its ``scratch_eval.json`` when present (same runs, same
seeds), else run here. Writes ``scheduler_v3_eval.md``/``.json``/``.png``.

Usage: python experiments/agents/train_scheduler_v3.py [--steps 400000] [--out runs/scheduler-v3]
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from datetime import date
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "experiments"))
sys.path.insert(0, str(ROOT / "examples"))


def train(steps: int, out: Path, episodes: int = 40) -> float:
    """Clone, then PPO; saves ``out``; returns the wall seconds."""
    import gymnasium as gym
    import train_from_scratch as recipe
    from sb3_contrib import MaskablePPO
    from stable_baselines3.common.env_util import make_vec_env
    from stable_baselines3.common.vec_env import VecNormalize

    from dlcluster_gym.agents import save_agent, use_one_thread
    from dlcluster_gym.agents.imitation import agreement, clone, record

    use_one_thread()
    t0 = time.perf_counter()
    env = gym.make("DLCluster/Scheduler-v3", scenarios=recipe.MIX, **recipe.KW)
    demos = record(env, "las", seeds=range(1000, 1000 + episodes))
    kw = {**recipe.KW, "scenarios": recipe.MIX, "episode_seeds": [2000, 2**31 - 1]}
    venv = VecNormalize(make_vec_env("DLCluster/Scheduler-v3", n_envs=2, seed=0, env_kwargs=kw),
                        norm_obs=False, gamma=0.999)  # fmt: skip
    model = MaskablePPO("MlpPolicy", venv, n_steps=1024, batch_size=256, gamma=0.999,
                        ent_coef=0.01, learning_rate=1e-4, seed=0, device="cpu")  # fmt: skip
    clone(model, demos, epochs=20)
    print(f"cloned {len(demos)} teacher steps, agreement {agreement(model, demos):.3f}")
    model.learn(steps)
    warm = {"warm_start": {"teacher": "las", "episodes": episodes, "epochs": 20}}
    save_agent(model, out, recipe.KW, env_id="DLCluster/Scheduler-v3", metadata=warm)
    return time.perf_counter() - t0


def main() -> None:
    import learn_from_scratch as lfs

    from dlcluster_gym.agents.evaluate import (
        evaluation_report,
        ratio_figure,
        report_sections,
        run_set,
    )

    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--steps", type=int, default=400_000)
    ap.add_argument("--out", default="runs/scheduler-v3/scheduler_v3.zip")
    ap.add_argument("--results", default=str(ROOT / "experiments/results/agents"))
    ap.add_argument("--seeds", default="201-210")
    args = ap.parse_args()
    lo, hi = (int(x) for x in args.seeds.split("-"))
    seeds = list(range(lo, hi + 1))
    out = Path(args.out)
    out.parent.mkdir(parents=True, exist_ok=True)
    res = Path(args.results)
    wall = train(args.steps, out)
    rows = run_set({"agent-v3": f"agent:{out}"}, lfs._specs(lfs.HELD_OUT), seeds,
                   progress=lambda s: print(s, flush=True))  # fmt: skip
    cached = res / "scratch_eval.json"
    if (
        cached.is_file()
        and json.loads(cached.read_text())["report"]["seeds"]
        and all(
            sorted(v) == seeds for v in json.loads(cached.read_text())["report"]["seeds"].values()
        )
    ):
        rows += [r for r in json.loads(cached.read_text())["report"]["rows"]
                 if not r["policy"].startswith("agent")]  # fmt: skip
    else:
        rows += run_set(lfs._baselines(), lfs._specs(lfs.HELD_OUT), seeds)
    report = evaluation_report(rows, ["agent-v3"])
    (res / "scheduler_v3_eval.png").write_bytes(
        ratio_figure(report["stats"], report["aggregate"], report["reference"])
    )
    cmd = "python experiments/agents/train_scheduler_v3.py " + " ".join(sys.argv[1:])
    teacher = [r for r in report["aggregate"] if r["policy"] in ("agent-v3", "v3-las")]
    head = (
        f"# Scheduler-v3 agent (warm start: `las`, then PPO), held out\n\n`{cmd}` "
        f"({date.today()}; cloning and {args.steps:,} PPO steps took {wall / 60:.1f} min "
        f"wall on 2 cores). Seeds {args.seeds}; the scenarios of "
        "[scratch_eval.md](scratch_eval.md).\n\nAgainst its teacher (`v3-las`), geometric "
        "mean over decisive scenarios of the per-scenario ratio to Dally: "
        + ", ".join(f"{r['policy']} {r['ratio_geomean']:.3f}" for r in teacher)
        + ".\n"
    )
    body = "\n".join(f"\n## {h}\n\n{t}\n" for h, t in report_sections(report, rows))
    (res / "scheduler_v3_eval.md").write_text(head + body)
    (res / "scheduler_v3_eval.json").write_text(
        json.dumps(
            {"command": cmd, "train_wall_s": wall, "report": report}, indent=1, default=float
        )
    )
    print(head + body)


if __name__ == "__main__":
    main()

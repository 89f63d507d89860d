"""Learning from scratch on DLCluster/Scheduler-v3: train the README's recipe
(``examples/train_from_scratch.py``), record its learning curve and evaluate it held out.

1. Trains the recipe (MaskablePPO, no imitation, 2 envs, one torch thread), saving a
   checkpoint every ``--every`` steps; the wall time of ``learn`` is recorded.
2. Learning curve: every checkpoint's average JCT (deterministic policy) on the curve seeds
   of two held-out scenarios, with random, the Scheduler-v3 heuristics and the deployable
   paper heuristics as horizontal lines (``scratch_curve.png``/``.csv``). The last
   checkpoint is the agent; no checkpoint is selected by these numbers.
3. Held-out table: the agent (deterministic, and stochastic with a fixed torch seed) against
   every deployable heuristic, the clairvoyant ``srw`` reference and the ``ideal`` bound, on
   scenarios and seeds never used in training or in choosing the recipe (its settings were
   chosen on seeds 101-103 of the two training presets), with 95 % confidence intervals
   (``dlcluster evaluate``'s report: ``scratch_eval.md``/``.json``/``.png``).

Usage: python experiments/agents/learn_from_scratch.py [--steps 400000] [--every 40000]
       [--out runs/scratch] [--results experiments/results/agents]
"""

from __future__ import annotations

import argparse
import csv
import json
import sys
import time
from datetime import date
from pathlib import Path
from typing import Any

import numpy as np

ROOT = Path(__file__).resolve().parents[2]
V3 = {"actions": "per-job", "preemption": True}
CURVE = [("poisson-2rack-400", "dally-poisson-2rack", {}),
         ("batch-2rack-500", "dally-batch-2rack", {})]  # fmt: skip
HELD_OUT = [*CURVE,
            ("poisson-4rack-400", "dally-poisson-4rack", {}),
            ("batch-4rack-250", "dally-batch-4rack", {"workload": {"num_jobs": 250}})]  # fmt: skip
HEURISTICS = ["dally", "dally-manual", "tiresias", "gandiva", "las-slots"]
REFERENCES = ["srw", "ideal"]
V3_POLICIES = ["random", "greedy", "las"]


def _specs(which: list[tuple[str, str, dict]]) -> list[Any]:
    from dlcluster_gym.agents.config import ScenarioSpec

    return [ScenarioSpec(scenario=s, overrides=o, label=lab) for lab, s, o in which]


class _Stochastic:
    """The agent sampling its actions (torch seeded per run: the same run gives the same
    actions)."""

    uses_masks = True

    def __init__(self, path: str) -> None:
        import torch
        from sb3_contrib import MaskablePPO

        torch.manual_seed(0)
        self.model = MaskablePPO.load(path, device="cpu")

    def predict(self, obs, state=None, episode_start=None, deterministic=True, action_masks=None):
        return self.model.predict(obs, state, episode_start, False, action_masks=action_masks)


def _v3(name: str) -> Any:
    from dlcluster_gym.envs.native import QueuePolicyScheduler
    from dlcluster_gym.envs.policies import make_env_policy

    return lambda: QueuePolicyScheduler(
        lambda env: make_env_policy(name, env), env_kwargs=V3, name=f"v3-{name}"
    )


def train(args: argparse.Namespace) -> tuple[dict[str, float], float, list[tuple[int, Path]]]:
    from stable_baselines3.common.callbacks import BaseCallback

    sys.path.insert(0, str(ROOT / "examples"))
    import train_from_scratch as recipe

    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    saved: list[tuple[int, Path]] = []
    clock: dict[str, float] = {}

    class Snapshots(BaseCallback):
        def _on_training_start(self) -> None:
            clock["start"] = time.perf_counter()
            self._save()

        def _save(self) -> None:
            from dlcluster_gym.agents import save_agent

            p = out / f"step_{self.num_timesteps:07d}.zip"
            save_agent(self.model, p, recipe.KW, env_id="DLCluster/Scheduler-v3")
            saved.append((self.num_timesteps, p))

        def _on_step(self) -> bool:
            if self.num_timesteps - saved[-1][0] >= args.every:
                self._save()
            return True

        def _on_training_end(self) -> None:
            clock["end"] = time.perf_counter()

    t0 = time.perf_counter()
    final = recipe.main(steps=args.steps, out=str(out / "scheduler.zip"), callback=Snapshots())
    print(f"recipe done in {time.perf_counter() - t0:.0f} s: {final}", flush=True)
    if saved[-1][0] < args.steps:
        saved.append((args.steps, out / "scheduler.zip"))
    return final, clock["end"] - clock["start"], saved


def curve(saved: list[tuple[int, Path]], seeds: list[int]) -> tuple[list[dict], list[dict]]:
    from dlcluster_gym.agents.evaluate import run_set

    points = []
    for steps, path in saved:
        for r in run_set({"agent": f"agent:{path}"}, _specs(CURVE), seeds):
            points.append({"steps": steps, "scenario": r["scenario"], "seed": r["seed"],
                           "avg_jct_h": r["avg_jct_s"] / 3600})  # fmt: skip
        print(f"curve: {steps} steps done", flush=True)
    lines = run_set(_baselines(), _specs(CURVE), seeds)
    return points, lines


def _baselines() -> dict[str, Any]:
    pols: dict[str, Any] = {f"v3-{p}": _v3(p) for p in V3_POLICIES}
    pols.update({p: p for p in HEURISTICS + REFERENCES})
    return pols


def plot_curve(points: list[dict], lines: list[dict], wall_s: float, path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    scen = [c[0] for c in CURVE]
    fig, axes = plt.subplots(1, len(scen), figsize=(6 * len(scen), 4.2), squeeze=False)
    styles = {"v3-random": ":", "v3-greedy": "--", "v3-las": "--"}
    for ax, sc in zip(axes[0], scen, strict=True):
        steps = sorted({p["steps"] for p in points})
        mean = [np.mean([p["avg_jct_h"] for p in points
                         if p["scenario"] == sc and p["steps"] == s]) for s in steps]  # fmt: skip
        ax.plot(steps, mean, "o-", color="black", lw=2, label="agent (from scratch)")
        for i, pol in enumerate(dict.fromkeys(r["policy"] for r in lines)):
            if pol in REFERENCES:
                continue
            v = np.mean([r["avg_jct_s"] / 3600 for r in lines
                         if r["scenario"] == sc and r["policy"] == pol])  # fmt: skip
            ax.axhline(v, ls=styles.get(pol, "-"), color=f"C{i}", lw=1, label=pol)
        ax.set_title(sc)
        ax.set_xlabel("PPO steps")
        ax.set_ylabel("average JCT (h), held-out seeds")
    axes[0][-1].legend(fontsize=8, loc="upper right")
    fig.suptitle(f"Scheduler-v3 from scratch (MaskablePPO, 2 envs; training took "
                 f"{wall_s / 60:.1f} min)")  # fmt: skip
    fig.tight_layout()
    fig.savefig(path, dpi=110)


def main() -> None:
    from dlcluster_gym.agents.evaluate import evaluation_report, ratio_figure, report_sections

    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--steps", type=int, default=400_000)
    ap.add_argument("--every", type=int, default=40_000)
    ap.add_argument("--out", default="runs/scratch")
    ap.add_argument("--results", default=str(ROOT / "experiments/results/agents"))
    ap.add_argument("--curve-seeds", default="201,202,203")
    ap.add_argument("--seeds", default="201-210")
    args = ap.parse_args()
    lo, hi = (int(x) for x in args.seeds.split("-"))
    seeds = list(range(lo, hi + 1))
    curve_seeds = [int(s) for s in args.curve_seeds.split(",")]
    res = Path(args.results)
    res.mkdir(parents=True, exist_ok=True)
    t0 = time.perf_counter()
    final, wall_s, saved = train(args)
    points, lines = curve(saved, curve_seeds)
    plot_curve(points, lines, wall_s, res / "scratch_curve.png")
    with (res / "scratch_curve.csv").open("w", newline="") as f:
        w = csv.DictWriter(f, fieldnames=["steps", "scenario", "seed", "avg_jct_h"])
        w.writeheader()
        w.writerows(points)
    from dlcluster_gym.agents.evaluate import run_set

    agent = str(Path(args.out) / "scheduler.zip")
    pols = {"agent": f"agent:{agent}", "agent-stochastic": lambda: _stoch(agent),
            **_baselines()}  # fmt: skip
    rows = run_set(pols, _specs(HELD_OUT), seeds, progress=lambda s: print(s, flush=True))
    report = evaluation_report(rows, ["agent", "agent-stochastic"])
    png = ratio_figure(report["stats"], report["aggregate"], report["reference"])
    (res / "scratch_eval.png").write_bytes(png)
    cmd = "python experiments/agents/learn_from_scratch.py " + " ".join(sys.argv[1:])
    head = (f"# Scheduler-v3 learned from scratch, held out\n\n`{cmd}` ({date.today()}; training "
            f"{wall_s / 60:.1f} min wall on 2 cores for {args.steps:,} steps; everything "
            f"{(time.perf_counter() - t0) / 60:.0f} min). Recipe: `examples/train_from_scratch."
            "py`. Seeds " + args.seeds + "; scenarios larger than any trained on (training: "
            "2 racks, 60-200 jobs).\n")  # fmt: skip
    body = "\n".join(f"\n## {h}\n\n{t}\n" for h, t in report_sections(report, rows))
    (res / "scratch_eval.md").write_text(head + body)
    (res / "scratch_eval.json").write_text(json.dumps(
        {"command": cmd, "train_wall_s": wall_s, "steps": args.steps, "recipe_result": final,
         "report": report}, indent=1, default=float))  # fmt: skip
    print(head + body)


def _stoch(path: str) -> Any:
    from dlcluster_gym.envs.native import QueuePolicyScheduler

    return QueuePolicyScheduler(lambda env: _Stochastic(path), env_kwargs=V3,
                                name="agent-stochastic")  # fmt: skip


if __name__ == "__main__":
    main()

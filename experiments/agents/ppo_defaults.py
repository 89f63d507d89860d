"""Does plain PPO learn under an env's defaults? The test that chose Scheduler-v4's defaults.

For each env id: MaskablePPO with the library's default hyper-parameters (``MlpPolicy``, no
imitation, one env, one torch thread), rewards normalized by ``VecNormalize`` (observations
not), trained on the env's own defaults (its default scenario, ``dally-poisson-4rack``) for a
fixed wall-time budget. Then, on validation seeds (never the held-out report seeds), the
trained policy is run deterministically and stochastically and compared with ``dally`` (what
a policy that always waits for a consolidated placement reproduces) and ``las-slots`` run
natively; the page also gives the policy's median probability of starting the focus job
when asked, and of preempting when offered a preemption (a policy that has learnt to wait
has a median start probability near 0).

Usage: python experiments/agents/ppo_defaults.py
       [--envs DLCluster/Scheduler-v3 DLCluster/Scheduler-v4] [--minutes 12]
       [--seeds 501 502 503] [--out experiments/results/agents/ppo_defaults]
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path
from typing import Any

import numpy as np
from room import pct_ci  # a neighbour script

ROOT = Path(__file__).resolve().parents[2]
REFERENCES = ("dally", "las-slots", "qssf-preemptive", "srsf")


def train(env_id: str, budget_s: float, seed: int = 0) -> tuple[Any, int, float]:
    """(model, steps, wall seconds) of plain MaskablePPO on ``env_id``'s defaults."""
    from sb3_contrib import MaskablePPO
    from stable_baselines3.common.env_util import make_vec_env
    from stable_baselines3.common.vec_env import VecNormalize

    from dlcluster_gym.agents import use_one_thread

    use_one_thread()
    venv = VecNormalize(make_vec_env(env_id, n_envs=1, seed=seed), norm_obs=False)
    model = MaskablePPO("MlpPolicy", venv, seed=seed, device="cpu")
    t0 = time.monotonic()
    last = t0
    while time.monotonic() - t0 < budget_s:
        model.learn(model.n_steps, reset_num_timesteps=False)
        if time.monotonic() - last >= 30:
            last = time.monotonic()
            print(f"{env_id}: {model.num_timesteps:,} steps, {last - t0:.0f} s", flush=True)
    return model, int(model.num_timesteps), time.monotonic() - t0


def evaluate(model: Any, env_id: str, seeds: list[int]) -> dict[str, Any]:
    """Average JCT per seed (deterministic, stochastic) and the median decision
    probabilities of the trained policy, on ``env_id``'s default scenario."""
    import gymnasium as gym
    import torch

    env = gym.make(env_id)
    out: dict[str, Any] = {"scenario": env.unwrapped.scenario.name}
    p_start: list[float] = []
    p_preempt: list[float] = []
    for det in (True, False):
        torch.manual_seed(0)
        jcts = []
        for seed in seeds:
            obs, info = env.reset(seed=seed)
            done = False
            while not done:
                mask = env.unwrapped.action_masks()
                if det:
                    phase = env.unwrapped._pj.phase if env.unwrapped._pj else 0
                    obs_t = model.policy.obs_to_tensor(obs)[0]
                    with torch.no_grad():
                        dist = model.policy.get_distribution(obs_t, action_masks=mask)
                    p = float(dist.distributions[0].probs[0, 1])
                    (p_start if phase == 1 else p_preempt if phase == 2 else []).append(p)
                action, _ = model.predict(obs, deterministic=det, action_masks=mask)
                obs, _, term, trunc, info = env.step(action)
                done = term or trunc
            jcts.append(float(info["results"]["avg_jct_s"]))
        out["deterministic" if det else "stochastic"] = jcts
    out["median_p_start"] = float(np.median(p_start)) if p_start else None
    out["median_p_preempt"] = float(np.median(p_preempt)) if p_preempt else None
    out["start_questions"] = len(p_start)
    out["preempt_questions"] = len(p_preempt)
    return out


def references(scenario: str, seeds: list[int]) -> dict[str, list[float]]:
    from dlcluster_gym import simulate

    return {
        p: [float(simulate(scenario, p, seed=s).summary["avg_jct_s"]) for s in seeds]
        for p in REFERENCES
    }


def _gmean_ratio(a: list[float], b: list[float]) -> float:
    return float(np.exp(np.mean(np.log(np.asarray(a) / np.asarray(b)))))


SEEDS = [501, 502, 503]
DEPLOYABLE = ("dally", "las-slots", "qssf-preemptive")


def room_closed(row: dict[str, Any]) -> tuple[dict[str, Any], dict[str, Any]]:
    """(the room on the row's seeds: ``qssf-preemptive``, ``las-slots`` and ``dally`` as the
    deployable floor, ``srsf`` as the clairvoyant ceiling; the deterministic agent's fraction
    of it closed), as ``leaderboard.room`` computes them."""
    from dlcluster_gym.leaderboard import room

    seeds = row.get("seeds", SEEDS)
    ref = row["references"]
    jcts = {p: dict(zip(seeds, ref[p], strict=True)) for p in (*DEPLOYABLE, "srsf")}
    kinds = {**dict.fromkeys(DEPLOYABLE, "deployable"), "srsf": "clairvoyant"}
    r = room.scenario_room(jcts, kinds)
    return r, room.fraction_closed(dict(zip(seeds, row["deterministic"], strict=True)), r)


def page(rows: list[dict[str, Any]], command: str, wall_s: float) -> str:
    lines = [
        "# Plain PPO on each Scheduler env's defaults",
        "",
        f"Written by `{command}` ({wall_s:,.0f} s wall on this machine). MaskablePPO with the "
        "library's default hyper-parameters, one env, rewards normalized (observations not), "
        "no imitation; evaluated on validation seeds (not the held-out report seeds). Ratios: "
        "geometric mean over the seeds of the average JCT / `dally`'s on the same seed "
        "(below 1: better than Dally). Room: 1 - srsf / the best of dally, las-slots and "
        "qssf-preemptive per seed (mean ± 95 % CI); the deterministic agent's fraction of it "
        "closed: sum(D - A) / sum(D - C) over the seeds ± half its 95 % paired bootstrap "
        "interval (`dlcluster_gym.leaderboard.room`; 'no room' below 5 %).",
        "",
        "| env | scenario | PPO steps | train s | agent (deterministic) | agent (stochastic) | "
        "las-slots | qssf-preemptive | srsf (clairvoyant) | room | fraction closed | "
        "median P(start) | median P(preempt) |",
        "|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for r in rows:
        ref = r["references"]
        d = ref["dally"]

        def fmt(x: float | None) -> str:
            return "-" if x is None else f"{x:.3f}"

        rm, closed = room_closed(r)
        frac = (
            pct_ci(closed["fraction"], closed["fraction_ci"])
            if rm["verdict"] == "room"
            else rm["verdict"]
        )
        lines.append(
            f"| `{r['env']}` | `{r['scenario']}` | {r['steps']:,} | {r['train_s']:.0f} | "
            f"{_gmean_ratio(r['deterministic'], d):.3f} | "
            f"{_gmean_ratio(r['stochastic'], d):.3f} | "
            f"{_gmean_ratio(ref['las-slots'], d):.3f} | "
            f"{_gmean_ratio(ref['qssf-preemptive'], d):.3f} | "
            f"{_gmean_ratio(ref['srsf'], d):.3f} | {pct_ci(rm['room'], rm['room_ci'])} | "
            f"{frac} | {fmt(r['median_p_start'])} | {fmt(r['median_p_preempt'])} |"
        )
    lines.append("")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--envs", nargs="+",
                    default=["DLCluster/Scheduler-v3", "DLCluster/Scheduler-v4"])  # fmt: skip
    ap.add_argument("--minutes", type=float, default=12.0)
    ap.add_argument("--seeds", type=int, nargs="+", default=SEEDS)
    ap.add_argument("--out", type=Path, default=ROOT / "experiments/results/agents/ppo_defaults")
    ap.add_argument(
        "--render", action="store_true", help="rewrite the page from --out's JSON; train nothing"
    )
    args = ap.parse_args(argv)
    if args.render:
        saved = json.loads((args.out / "ppo_defaults.json").read_text())
        text = page(saved["rows"], saved["command"], saved["wall_s"])
        (args.out / "ppo_defaults.md").write_text(text)
        print(text)
        return
    import warnings

    warnings.simplefilter("ignore", DeprecationWarning)
    t0 = time.monotonic()
    rows = []
    for env_id in args.envs:
        model, steps, train_s = train(env_id, args.minutes * 60)
        row = {"env": env_id, "steps": steps, "train_s": train_s, "seeds": list(args.seeds)}
        row.update(evaluate(model, env_id, args.seeds))
        row["references"] = references(row["scenario"], args.seeds)
        rows.append(row)
        print(json.dumps(row), flush=True)
    args.out.mkdir(parents=True, exist_ok=True)
    command = ("python experiments/agents/ppo_defaults.py " + " ".join(sys.argv[1:])).strip()
    wall = time.monotonic() - t0
    saved = {"command": command, "wall_s": wall, "rows": rows}
    (args.out / "ppo_defaults.json").write_text(json.dumps(saved, indent=1) + "\n")
    (args.out / "ppo_defaults.md").write_text(page(rows, command, wall))
    print(page(rows, command, wall))


if __name__ == "__main__":
    main()

"""PPO training throughput: MaskablePPO env steps per second with 2 envs (issue #17).

Each row trains a fresh MaskablePPO (MLP 64x64, n_steps 512 per env, batch 128, 10 epochs:
SB3's defaults except n_steps/batch) for ``--timesteps`` steps on 2 envs in one process
(``DummyVecEnv``, one torch thread) and reports steps per wall-clock second and per CPU second
of the process (robust to other load on the machine). Needs the ``agents`` extra.

Usage: python experiments/bench_ppo.py [--timesteps N] [--envs Placement-v1 Scheduler-v0]
"""

from __future__ import annotations

import argparse
import json
import time

import dlcluster_gym  # noqa: F401  (registers the envs)


def bench(env_id: str, timesteps: int, scenario: str) -> dict:
    import torch
    from sb3_contrib import MaskablePPO
    from stable_baselines3.common.env_util import make_vec_env

    torch.set_num_threads(1)
    venv = make_vec_env(f"DLCluster/{env_id}", n_envs=2, seed=0, env_kwargs={"scenario": scenario})
    model = MaskablePPO("MlpPolicy", venv, n_steps=512, batch_size=128, seed=0, device="cpu")
    t0, c0 = time.perf_counter(), time.process_time()
    model.learn(total_timesteps=timesteps)
    wall, cpu = time.perf_counter() - t0, time.process_time() - c0
    n = int(model.num_timesteps)
    return {"env": env_id, "scenario": scenario, "steps": n, "wall_s": wall, "cpu_s": cpu,
            "steps_per_s": n / wall, "steps_per_cpu_s": n / cpu}  # fmt: skip


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--timesteps", type=int, default=4096)
    ap.add_argument("--envs", nargs="*", default=["Placement-v1", "Scheduler-v0"])
    ap.add_argument("--scenario", default="dally-poisson-4rack")
    args = ap.parse_args()
    rows = [bench(e, args.timesteps, args.scenario) for e in args.envs]
    print(json.dumps(rows, indent=1))


if __name__ == "__main__":
    main()

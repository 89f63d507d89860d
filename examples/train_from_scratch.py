"""Learn DLCluster/Scheduler-v3 from scratch with MaskablePPO (progress every 30 s); save it."""

import gymnasium as gym
from sb3_contrib import MaskablePPO
from stable_baselines3.common.env_util import make_vec_env
from stable_baselines3.common.vec_env import VecNormalize

from dlcluster_gym.agents import imitation, save_agent, use_one_thread
from dlcluster_gym.agents.progress import Progress

MIX = [{"scenario": "dally-poisson-2rack", "ranges": {"num_jobs": [100, 200], "load": [0.7, 1.1]}},
       {"scenario": "dally-batch-2rack", "ranges": {"num_jobs": [60, 150]}}]  # fmt: skip
KW = {"preemption": True}  # held-out seeds stay below 1000: training draws from [1000, 2**31 - 1)
TRAIN_KW = {**KW, "scenarios": MIX, "episode_seeds": [1000, 2**31 - 1]}


def main(steps=400_000, out="runs/scratch/scheduler.zip", held_out=range(201, 211), callback=None):
    use_one_thread()  # small networks: one torch thread is fastest on a few cores
    venv = make_vec_env("DLCluster/Scheduler-v3", n_envs=2, seed=0, env_kwargs=TRAIN_KW)
    venv = VecNormalize(venv, norm_obs=False, gamma=0.999)
    model = MaskablePPO("MlpPolicy", venv, n_steps=1024, batch_size=256, gamma=0.999,
                        ent_coef=0.01, seed=0, device="cpu")  # fmt: skip
    env = gym.make("DLCluster/Scheduler-v3", scenario="dally-batch-2rack", **KW)
    model.learn(steps, callback=[Progress(env, validation_seed=501), *filter(None, [callback])])
    save_agent(model, out, KW, env_id="DLCluster/Scheduler-v3")
    return {p: imitation.average_jct_h(env, p, held_out) for p in ("random", "las", f"agent:{out}")}


if __name__ == "__main__":
    print(main())

import gymnasium as gym
import numpy as np
import torch
from sb3_contrib import MaskablePPO
from stable_baselines3.common.env_util import make_vec_env

import dlcluster_gym  # noqa: F401  (registers the DLCluster/ envs)

torch.set_num_threads(1)  # small networks: one thread is fastest
ENV, SCEN = "DLCluster/Scheduler-v0", {"workload": {"num_jobs": 100}}
KW = {"scenario": "dally-poisson-2rack", "scenario_overrides": SCEN, "reward_scale_s": 360_000}


def avg_jct_h(act, seeds=(101, 102, 103)):  # held-out seeds, never trained on
    env, jcts = gym.make(ENV, **KW), []
    for seed in seeds:
        obs, _ = env.reset(seed=seed)
        done = False
        while not done:
            obs, _, term, trunc, info = env.step(act(obs, env.unwrapped.action_masks()))
            done = term or trunc
        jcts.append(info["results"]["avg_jct_s"] / 3600)
    return float(np.mean(jcts))


rng = np.random.default_rng(0)
print(f"random: {avg_jct_h(lambda o, m: rng.choice(np.flatnonzero(m))):.1f} h avg JCT", flush=True)
model = MaskablePPO("MlpPolicy", make_vec_env(ENV, 2, seed=0, env_kwargs=KW), gamma=1.0, seed=0)
model.learn(total_timesteps=20_000)
print(f"PPO:    {avg_jct_h(lambda o, m: model.predict(o, action_masks=m)[0]):.1f} h avg JCT")

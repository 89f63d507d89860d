import gymnasium as gym
import numpy as np
from sb3_contrib import MaskablePPO
from stable_baselines3.common.env_util import make_vec_env
from stable_baselines3.common.vec_env import VecNormalize

import dlcluster_gym  # noqa: F401  (registers the DLCluster/ envs)

ENV = "DLCluster/Scheduler-v0"
KW = {"scenario": "dally-poisson-2rack", "scenario_overrides": {"workload": {"num_jobs": 100}}}


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
venv = VecNormalize(make_vec_env(ENV, n_envs=2, seed=0, env_kwargs=KW), norm_obs=False)
model = MaskablePPO("MlpPolicy", venv, n_steps=512, batch_size=128, gamma=1.0, seed=0)
model.learn(total_timesteps=20_000)
print(f"PPO:    {avg_jct_h(lambda o, m: model.predict(o, action_masks=m)[0]):.1f} h avg JCT")

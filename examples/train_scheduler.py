import gymnasium as gym
import numpy as np
import torch
from sb3_contrib import MaskablePPO
from stable_baselines3.common.env_util import make_vec_env

import dlcluster_gym  # noqa: F401  (registers the DLCluster/ envs)
from dlcluster_gym.envs.policies import make_env_policy

torch.set_num_threads(1)  # small networks: one thread is fastest
ENV = "DLCluster/Scheduler-v0"
KW = {"scenario": "dally-poisson-2rack", "scenario_overrides": {"workload": {"num_jobs": 100}}}


def avg_jct_h(act, seeds, log=None):  # act(obs, mask, env) -> action; log keeps the steps
    env, jcts = gym.make(ENV, **KW), []
    for seed in seeds:
        (obs, _), done = env.reset(seed=seed), False
        while not done:
            mask = env.unwrapped.action_masks()
            a = int(act(obs, mask, env))
            log is not None and log.append((obs, a, mask))
            obs, _, term, trunc, info = env.step(a)
            done = term or trunc
        jcts.append(info["results"]["avg_jct_s"] / 3600)
    return float(np.mean(jcts))


held_out, rng, data = (101, 102, 103), np.random.default_rng(0), []  # never trained on
print(f"random: {avg_jct_h(lambda o, m, e: rng.choice(np.flatnonzero(m)), held_out):.1f} h")
# 1. imitation: record a teacher on 30 training seeds (srw-slots sees true durations, the
#    student does not) and fit the policy to its choices (masked cross-entropy)
avg_jct_h(lambda o, m, e: make_env_policy("srw-slots", e).predict(o)[0], range(30), data)
model = MaskablePPO("MlpPolicy", make_vec_env(ENV, 2, seed=0, env_kwargs=KW), gamma=1.0,
                    learning_rate=3e-5, seed=0)  # fmt: skip
obs, act, mask = (torch.as_tensor(np.array(x)) for x in zip(*data, strict=True))
opt = torch.optim.Adam(model.policy.parameters(), lr=1e-3)
for _ in range(30):
    for i in torch.randperm(len(act)).split(256):
        _, logp, _ = model.policy.evaluate_actions(obs[i], act[i], action_masks=mask[i])
        opt.zero_grad(), (-logp.mean()).backward(), opt.step()
agent = lambda o, m, e: model.predict(o, action_masks=m)[0]  # noqa: E731
print(f"cloned: {avg_jct_h(agent, held_out):.1f} h")
model.learn(total_timesteps=10_000)  # 2. PPO from the clone (small learning rate)
print(f"+PPO:   {avg_jct_h(agent, held_out):.1f} h")

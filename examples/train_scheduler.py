"""Clone a teacher in DLCluster/Scheduler-v2, go on with PPO, compare with random."""

import gymnasium as gym
from sb3_contrib import MaskablePPO
from stable_baselines3.common.env_util import make_vec_env

from dlcluster_gym.agents import progress, use_one_thread
from dlcluster_gym.agents.imitation import agreement, average_jct_h, clone, record

ENV, TEACHER = "DLCluster/Scheduler-v2", "las-slots"  # las-slots: least attained service
KW = {"scenario": "dally-poisson-2rack", "scenario_overrides": {"workload": {"num_jobs": 100}},
      "preemption": True, "order": "las", "running_order": "attained"}  # fmt: skip


def main(episodes=30, epochs=100, ppo_steps=10_000, held_out=(101, 102, 103)):
    use_one_thread()  # small networks: one thread, robust to a shared machine
    env = gym.make(ENV, **KW)  # held_out: seeds never used for training
    jct = {p: average_jct_h(env, p, held_out) for p in ("random", TEACHER)}  # avg JCT, hours
    demos = record(env, TEACHER, seeds=range(episodes))  # the teacher's (obs, action, mask)
    vec_env = make_vec_env(ENV, n_envs=2, env_kwargs=KW)  # PPO's training envs
    model = MaskablePPO("MlpPolicy", vec_env, learning_rate=3e-5, seed=0)
    clone(model, demos, epochs=epochs)  # masked cross-entropy to the teacher's actions
    jct["cloned"], jct["agreement"] = average_jct_h(env, model, held_out), agreement(model, demos)
    model.learn(ppo_steps, callback=progress.Progress(env))  # PPO from the clone, a line / 30 s
    jct["after PPO"] = average_jct_h(env, model, held_out)
    return {k: round(v, 3) for k, v in jct.items()}


if __name__ == "__main__":
    print(main())

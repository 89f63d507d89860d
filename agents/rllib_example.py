"""RLlib PPO with action masking on a DLCluster env, sampling in parallel processes.

RLlib's new API stack: ``PPOConfig`` with RLlib's action-masking ``RLModule``
(``ActionMaskingTorchRLModule``, shipped in ``ray.rllib.examples``: it adds ``log(mask)`` to
the policy's logits), the env wrapped by :class:`~dlcluster_gym.agents.rllib_env.
ActionMaskObservation` (the observation becomes ``{"observations": ..., "action_mask":
...}``, and a masked action raises instead of reaching the env), ``--env-runners`` sampling
processes with ``--envs-per-runner`` envs each, the learner in this process. At the end the
trained policy acts greedily (masked argmax) on held-out episode seeds, and the average JCT
of each episode is read from the env's ``info["results"]["avg_jct_s"]`` on its last step.

Needs the ``rllib`` extra (``pip install -e ".[rllib]"``; docs/agents.md, "Scaling out with
RLlib"). Usage::

    python -m dlcluster_gym.agents.rllib_example --timesteps 20000 [--env-id DLCluster/Scheduler-v3]
        [--scenario dally-poisson-4rack] [--env-runners 2] [--envs-per-runner 2]
"""

from __future__ import annotations

import argparse
import json
import math
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from .rllib_env import MASK_KEY, OBS_KEY, make_masked_env
from .threads import use_one_thread

ENV_NAME = "dlcluster-masked"
"""The name the wrapped env is registered under with Ray Tune's env registry."""
DEFAULT_ENV_ID = "DLCluster/Scheduler-v3"


@dataclass
class RLlibRun:
    """What :func:`train` returns: the last iteration's metrics and every iteration's."""

    algo: Any
    timesteps: int
    wall_s: float
    last: dict[str, float]
    history: list[dict[str, float]] = field(default_factory=list)


def _env_creator(config: dict[str, Any]) -> Any:
    return make_masked_env(config["env_id"], **dict(config.get("env_kwargs") or {}))


def build_config(
    env_id: str = DEFAULT_ENV_ID,
    env_kwargs: dict[str, Any] | None = None,
    *,
    env_runners: int = 2,
    envs_per_runner: int = 2,
    train_batch: int = 2048,
    minibatch: int = 256,
    epochs: int = 10,
    lr: float = 3e-4,
    gamma: float = 1.0,
    hidden: Sequence[int] = (64, 64),
    seed: int = 0,
) -> Any:
    """A ``PPOConfig`` for ``env_id`` (made with ``env_kwargs``) with action masking.

    ``gamma`` 1.0: several decisions share one simulated instant, so a per-step discount
    would make waiting look cheap (as for the shipped agents, docs/agents.md)."""
    from ray.rllib.algorithms.ppo import PPOConfig
    from ray.rllib.core.rl_module.rl_module import RLModuleSpec
    from ray.rllib.examples.rl_modules.classes.action_masking_rlm import (
        ActionMaskingTorchRLModule,
    )
    from ray.tune.registry import register_env

    register_env(ENV_NAME, _env_creator)
    return (
        PPOConfig()
        .environment(ENV_NAME, env_config={"env_id": env_id, "env_kwargs": env_kwargs or {}})
        .framework("torch")
        .env_runners(
            num_env_runners=env_runners,
            num_envs_per_env_runner=envs_per_runner,
            num_cpus_per_env_runner=1,
        )
        .learners(num_learners=0)  # the learner runs in this process
        .training(
            train_batch_size_per_learner=train_batch,
            minibatch_size=minibatch,
            num_epochs=epochs,
            lr=lr,
            gamma=gamma,
        )
        .rl_module(
            rl_module_spec=RLModuleSpec(
                module_class=ActionMaskingTorchRLModule,
                model_config={"fcnet_hiddens": list(hidden), "fcnet_activation": "tanh"},
            )
        )
        # an env runner that fails (a masked action, a simulator error) stops training with
        # its error instead of being restarted quietly
        .fault_tolerance(restart_failed_env_runners=False)
        .debugging(seed=seed)
    )


def _metrics(result: dict[str, Any]) -> dict[str, float]:
    from ray.rllib.core import DEFAULT_MODULE_ID
    from ray.rllib.utils.metrics import (
        ENV_RUNNER_RESULTS,
        EPISODE_RETURN_MEAN,
        LEARNER_RESULTS,
        NUM_ENV_STEPS_SAMPLED_LIFETIME,
    )

    runners = result.get(ENV_RUNNER_RESULTS, {})
    learner = result.get(LEARNER_RESULTS, {}).get(DEFAULT_MODULE_ID, {})
    out = {
        "timesteps": float(runners.get(NUM_ENV_STEPS_SAMPLED_LIFETIME, math.nan)),
        "episode_return_mean": float(runners.get(EPISODE_RETURN_MEAN, math.nan)),
    }
    for key in ("policy_loss", "vf_loss", "entropy", "mean_kl_loss", "total_loss"):
        if key in learner:
            out[key] = float(learner[key])
    return out


def train(
    env_id: str = DEFAULT_ENV_ID,
    env_kwargs: dict[str, Any] | None = None,
    *,
    timesteps: int = 20_000,
    iterations: int | None = None,
    **config_kwargs: Any,
) -> RLlibRun:
    """Train PPO until ``timesteps`` env steps were sampled (or for ``iterations``
    iterations); starts Ray in this process if it is not running. ``config_kwargs`` go to
    :func:`build_config`. The caller owns ``run.algo`` (``algo.stop()`` frees its
    processes)."""
    import ray

    use_one_thread()  # the learner's small MLP (agents/threads.py)
    if not ray.is_initialized():
        ray.init(include_dashboard=False)
    algo = build_config(env_id, env_kwargs, **config_kwargs).build_algo()
    t0 = time.perf_counter()
    history: list[dict[str, float]] = []
    while True:
        history.append(_metrics(algo.train()))
        done = history[-1]["timesteps"] >= timesteps
        if iterations is not None:
            done = len(history) >= iterations
        if done:
            break
    return RLlibRun(
        algo, int(history[-1]["timesteps"]), time.perf_counter() - t0, history[-1], history
    )


def greedy_action(module: Any, obs: dict[str, np.ndarray], heads: Sequence[int]) -> Any:
    """The masked argmax of ``module`` (an action-masking RLModule) for one observation:
    one int for a ``Discrete`` action, an array of one choice per head for
    ``MultiDiscrete``."""
    import torch
    from ray.rllib.core.columns import Columns

    batch = {
        Columns.OBS: {
            OBS_KEY: torch.as_tensor(obs[OBS_KEY][None], dtype=torch.float32),
            MASK_KEY: torch.as_tensor(obs[MASK_KEY][None], dtype=torch.float32),
        }
    }
    with torch.no_grad():
        logits = module.forward_inference(batch)[Columns.ACTION_DIST_INPUTS][0].numpy()
    parts = np.split(logits, np.cumsum(heads)[:-1])
    choice = np.array([int(np.argmax(p)) for p in parts], dtype=np.int64)
    return int(choice[0]) if len(heads) == 1 else choice


def held_out_jct_h(
    module: Any,
    env_id: str = DEFAULT_ENV_ID,
    env_kwargs: dict[str, Any] | None = None,
    seeds: Sequence[int] = (101, 102),
) -> float:
    """Mean over ``seeds`` of the episode's average JCT in hours with the greedy masked
    policy (``inf`` when an episode leaves jobs unfinished: its average would cover only the
    finished jobs)."""
    env = make_masked_env(env_id, **(env_kwargs or {}))
    jcts = []
    for seed in seeds:
        obs, _ = env.reset(seed=int(seed))
        done, info = False, {}
        while not done:
            obs, _, terminated, truncated, info = env.step(greedy_action(module, obs, env.heads))
            done = terminated or truncated
        res = info["results"]
        jcts.append(math.inf if res.get("jobs_unfinished", 0) else res["avg_jct_s"] / 3600.0)
    env.close()
    return float(np.mean(jcts))


def main(argv: Sequence[str] | None = None) -> dict[str, Any]:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--timesteps", type=int, default=20_000, help="env steps to sample")
    ap.add_argument("--env-id", default=DEFAULT_ENV_ID, help="a masked DLCluster env id")
    ap.add_argument("--scenario", default="dally-poisson-4rack")
    ap.add_argument("--num-jobs", type=int, default=None, help="override the workload's jobs")
    ap.add_argument("--env-runners", type=int, default=2, help="sampling processes")
    ap.add_argument("--envs-per-runner", type=int, default=2)
    ap.add_argument("--train-batch", type=int, default=2048)
    ap.add_argument("--held-out-seeds", default="101,102", help="comma-separated episode seeds")
    ap.add_argument("--seed", type=int, default=0)
    args = ap.parse_args(argv)
    kwargs: dict[str, Any] = {"scenario": args.scenario}
    if args.num_jobs is not None:
        kwargs["scenario_overrides"] = {"workload": {"num_jobs": args.num_jobs}}
    seeds = [int(s) for s in args.held_out_seeds.split(",") if s.strip()]
    run = train(
        args.env_id,
        kwargs,
        timesteps=args.timesteps,
        env_runners=args.env_runners,
        envs_per_runner=args.envs_per_runner,
        train_batch=args.train_batch,
        seed=args.seed,
    )
    try:
        jct = held_out_jct_h(run.algo.get_module(), args.env_id, kwargs, seeds)
    finally:
        run.algo.stop()
    summary = {
        "env_id": args.env_id,
        "env_kwargs": kwargs,
        "timesteps": run.timesteps,
        "iterations": len(run.history),
        "train_wall_s": round(run.wall_s, 1),
        "steps_per_s": round(run.timesteps / run.wall_s, 1),
        "last_iteration": run.last,
        "held_out_seeds": seeds,
        "held_out_avg_jct_h": jct,
    }
    print(json.dumps(summary, indent=1))
    print(f"held-out average JCT: {jct:.3f} h (seeds {', '.join(map(str, seeds))})")
    return summary


if __name__ == "__main__":
    main()

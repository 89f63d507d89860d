"""Behaviour cloning building blocks: record a teacher, fit a policy to it, evaluate.

The project's warm start (``agents/train.py``) and the newcomer script
(``examples/train_scheduler.py``) both use these:

* ``record(env, teacher, seeds)``: run a named env policy (a heuristic teacher) on the given
  episode seeds and keep every step's observation, action, action mask, reward and episode end
  (``Demonstrations``).
* ``clone(model, demos)``: fit an SB3 (Maskable)PPO policy to the teacher's actions by
  (masked) cross-entropy, or by mean squared error of the Gaussian mean for ``Box`` actions;
  optionally the critic to value targets (``returns_to_go``) in the same steps.
* ``agreement(model, demos)``: how often the fitted policy picks the teacher's action.
* ``average_jct_h(env, policy, seeds)``: average JCT (hours) over episode seeds with a
  deterministic policy (a name, an env policy, or an SB3 model).

Imports torch and stable-baselines3 lazily (inside the functions), like the rest of ``agents``.
"""

from __future__ import annotations

import inspect
import math
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any

import gymnasium as gym
import numpy as np

from dlcluster_gym.envs.agent_meta import env_kind
from dlcluster_gym.envs.policies import (
    EnvPolicy,
    check_env_policy_name,
    make_env_policy,
    rollout,
)
from dlcluster_gym.errors import ConfigError

from .envs import ScenarioMixEnv
from .load import AgentPolicy
from .threads import use_one_thread


@dataclass(frozen=True)
class Demonstrations:
    """A teacher's steps, stacked: ``obs`` (n, d) float32 observations, ``act`` (n,) or
    (n, k) actions, ``mask`` (n, A) bool action masks (``None`` for ``Box`` actions; the
    teacher's own action is always set), ``rew`` (n,) float64 rewards and ``end`` (n,) bool
    episode ends (terminated or truncated)."""

    obs: np.ndarray
    act: np.ndarray
    mask: np.ndarray | None
    rew: np.ndarray
    end: np.ndarray

    def __len__(self) -> int:
        return int(self.act.shape[0])


def _check_seeds(seeds: Iterable[int | None], what: str) -> list[int | None]:
    out = list(seeds)
    if not out:
        raise ConfigError(f"{what}: seeds is empty; give at least one episode seed")
    for s in out:
        if s is not None and (isinstance(s, bool) or not isinstance(s, int | np.integer)):
            raise ConfigError(f"{what}: seeds must be integers (or None), got {s!r}")
    return out


def _check_policy_name(env: gym.Env, name: str, what: str) -> None:
    if not isinstance(name, str):
        raise ConfigError(f"{what}: a policy name (str) is needed, got {name!r}")
    check_env_policy_name(env_kind(_episode_env(env)), name)


def _episode_env(env: gym.Env) -> gym.Env:
    """The env a teacher reads this episode (a scenario mix switches envs at each reset)."""
    inner = env.unwrapped
    return inner.env if isinstance(inner, ScenarioMixEnv) else inner


def record(env: gym.Env, teacher: str, seeds: Iterable[int | None]) -> Demonstrations:
    """Run the env policy named ``teacher`` (``make_env_policy``; e.g. ``"las-slots"``) for
    one episode per seed (``reset(seed=s)``; ``None`` continues the env's own seeding) and
    keep every step. The teacher is made afresh on each episode's env and acts
    deterministically; masks are kept for ``Discrete`` and ``MultiDiscrete`` actions
    (``env.unwrapped.action_masks()``; per head, concatenated), with the teacher's choice set
    so that it stays learnable."""
    seeds = _check_seeds(seeds, f"record({teacher!r})")
    _check_policy_name(env, teacher, "record")
    masked = isinstance(env.action_space, gym.spaces.Discrete | gym.spaces.MultiDiscrete)
    heads = (
        np.cumsum([0, *env.action_space.nvec[:-1]])
        if masked and not isinstance(env.action_space, gym.spaces.Discrete)
        else None
    )  # MultiDiscrete: each head's offset
    cols: dict[str, list[Any]] = {"obs": [], "act": [], "mask": [], "rew": [], "end": []}
    for seed in seeds:
        obs, _ = env.reset(seed=seed)
        policy = make_env_policy(teacher, _episode_env(env))
        done = False
        while not done:
            # the mask before the teacher acts (an env-acting teacher may act on the env)
            mask = env.unwrapped.action_masks().copy() if masked else None  # type: ignore
            a, _ = policy.predict(obs, deterministic=True)
            cols["obs"].append(obs)
            cols["act"].append(np.asarray(a))
            if mask is not None:
                if heads is None:
                    mask[int(a)] = True
                else:  # one mask per head, concatenated (sb3-contrib's convention)
                    mask[heads + np.asarray(a, dtype=np.int64).reshape(-1)] = True
                cols["mask"].append(mask)
            obs, r, term, trunc, _ = env.step(a)
            done = bool(term or trunc)
            cols["rew"].append(np.float64(r))
            cols["end"].append(np.bool_(done))
    return Demonstrations(
        obs=np.asarray(cols["obs"]),
        act=np.asarray(cols["act"]),
        mask=np.asarray(cols["mask"]) if masked else None,
        rew=np.asarray(cols["rew"]),
        end=np.asarray(cols["end"]),
    )


def returns_to_go(rew: np.ndarray, end: np.ndarray, gamma: float, scale: float = 1.0) -> np.ndarray:
    """Discounted sum of the rewards (each divided by ``scale``) from each step to its
    episode's end: the critic's target when cloning before PPO."""
    togo, acc = np.empty(len(rew), dtype=np.float64), 0.0
    for i in range(len(rew) - 1, -1, -1):
        acc = (0.0 if end[i] else acc * gamma) + rew[i] / scale
        togo[i] = acc
    return togo


def clone(
    model: Any,
    demos: Demonstrations,
    *,
    epochs: int = 10,
    batch_size: int = 256,
    learning_rate: float = 1e-3,
    seed: int = 0,
    weights: np.ndarray | None = None,
    value_targets: np.ndarray | None = None,
    value_coef: float = 0.5,
) -> dict[str, float]:
    """Fit ``model.policy`` (an SB3 PPO or MaskablePPO model, or its policy) to the
    demonstrations with Adam: minus the (``weights``-weighted) log-probability of the
    teacher's action under the masked distribution for ``Discrete`` actions, the squared
    error of the Gaussian mean for ``Box`` actions; plus ``value_coef`` x the squared error
    of the critic to ``value_targets`` when given. Mini-batches come from a permutation per
    epoch drawn from ``torch.Generator().manual_seed(seed)`` (deterministic). Returns the
    last batch's losses."""
    import torch as th

    n = len(demos)
    if n == 0:
        raise ConfigError("clone: the demonstrations are empty (record at least one step)")
    for key, v in (("epochs", epochs), ("batch_size", batch_size)):
        if isinstance(v, bool) or not isinstance(v, int) or v < 1:
            raise ConfigError(f"clone: {key} must be an integer >= 1, got {v!r}")
    if not (isinstance(learning_rate, int | float) and learning_rate > 0):
        raise ConfigError(f"clone: learning_rate must be a number > 0, got {learning_rate!r}")
    for key, arr in (("weights", weights), ("value_targets", value_targets)):
        if arr is not None and len(arr) != n:
            raise ConfigError(f"clone: {key} has {len(arr)} entries, the demonstrations {n}")
    use_one_thread()
    policy = getattr(model, "policy", model)
    obs = th.as_tensor(demos.obs, dtype=th.float32)
    act = th.as_tensor(demos.act)
    masks = th.as_tensor(demos.mask) if demos.mask is not None else None
    weight = th.ones(n) if weights is None else th.as_tensor(weights, dtype=th.float32)
    target_v = None if value_targets is None else th.as_tensor(value_targets, dtype=th.float32)
    opt = th.optim.Adam(policy.parameters(), lr=learning_rate)
    gen = th.Generator().manual_seed(seed)
    policy.set_training_mode(True)
    last: dict[str, float] = {}
    for _ in range(epochs):
        perm = th.randperm(n, generator=gen)
        for i in range(0, n, batch_size):
            idx = perm[i : i + batch_size]
            o = obs[idx]
            if masks is not None:
                dist = policy.get_distribution(o, action_masks=masks[idx].numpy())
                pi_loss = -(dist.log_prob(act[idx]) * weight[idx]).mean()
            else:
                dist = policy.get_distribution(o)
                pi_loss = th.nn.functional.mse_loss(dist.distribution.mean, act[idx].float())
            loss = pi_loss
            last = {"policy_loss": pi_loss.item()}
            if target_v is not None:
                pred = policy.predict_values(o).flatten()
                v_loss = th.nn.functional.mse_loss(pred, target_v[idx])
                loss = pi_loss + value_coef * v_loss
                last["value_loss"] = v_loss.item()
            opt.zero_grad()
            loss.backward()
            opt.step()
    policy.set_training_mode(False)
    return last


def agreement(model: Any, demos: Demonstrations) -> float:
    """Fraction of the recorded steps on which ``model`` (deterministic, with the recorded
    masks) picks the teacher's action (``Discrete`` actions only)."""
    if demos.mask is None:
        raise ConfigError("agreement: needs Discrete actions (the demonstrations have no masks)")
    if len(demos) == 0:
        raise ConfigError("agreement: the demonstrations are empty")
    use_one_thread()
    got, _ = model.predict(demos.obs, deterministic=True, action_masks=demos.mask)
    return float(np.mean(np.asarray(got).reshape(-1) == demos.act.reshape(-1)))


def _as_env_policy(env: gym.Env, policy: EnvPolicy | Any) -> EnvPolicy:
    """An SB3 model acts with the env's masks (as a shipped agent does); others as they are."""
    from stable_baselines3.common.base_class import BaseAlgorithm

    if not isinstance(policy, BaseAlgorithm):
        return policy
    use_one_thread()
    masks = "action_masks" in inspect.signature(policy.predict).parameters
    kind = env_kind(_episode_env(env)) if masks else "DelayTimer"  # a kind that passes no masks
    return AgentPolicy(policy, {"env_kind": kind})


def average_jct_h(env: gym.Env, policy: str | EnvPolicy | Any, seeds: Sequence[int]) -> float:
    """Mean over ``seeds`` of the episode's average JCT in hours, acting deterministically
    (``rollout``). ``policy`` is an env policy name (made afresh for each episode), an env
    policy, or an SB3 model (given the env's action masks when it takes them). ``inf`` when an
    episode leaves jobs unfinished: its average covers only the jobs that finished."""
    seeds = _check_seeds(seeds, "average_jct_h")
    if None in seeds:
        raise ConfigError("average_jct_h: every seed must be an integer (got None)")
    if isinstance(policy, str):
        _check_policy_name(env, policy, "average_jct_h")
    jcts = []
    for seed in seeds:
        if isinstance(policy, str):
            env.reset(seed=seed)  # the named policy reads this episode's env
            acting = make_env_policy(policy, _episode_env(env))
        else:
            acting = _as_env_policy(env, policy)
        info, _, _ = rollout(env, acting, seed=seed)
        res = info["results"]
        jcts.append(math.inf if res.get("jobs_unfinished", 0) else res["avg_jct_s"] / 3600.0)
    return float(np.mean(jcts))

"""``agents.threads``: the agents' torch set-up turns off ``torch.distributions``' argument
checks, and MaskablePPO learns exactly the same weights and actions with them off as on (the
checks only raise; they change no number)."""

from __future__ import annotations

import gymnasium as gym
import numpy as np
import pytest

pytest.importorskip("sb3_contrib")

import torch  # after the skip: torch comes with the agents extra
from sb3_contrib import MaskablePPO

import dlcluster_gym  # noqa: F401  (registers the envs)
from dlcluster_gym.agents.threads import skip_distribution_checks, use_one_thread


def _learn(validate: bool) -> tuple[list[np.ndarray], np.ndarray]:
    torch.distributions.Distribution.set_default_validate_args(validate)
    env = gym.make("DLCluster/Scheduler-v4", scenario="dally-poisson-2rack")
    model = MaskablePPO("MlpPolicy", env, n_steps=128, batch_size=64, n_epochs=2, seed=0,
                        device="cpu")  # fmt: skip
    model.learn(256)
    obs, _ = env.reset(seed=7)
    actions = []
    for _ in range(20):
        mask = env.unwrapped.action_masks()
        a, _ = model.predict(obs, action_masks=mask, deterministic=False)
        actions.append(a)
        obs, _, term, trunc, _ = env.step(a)
        if term or trunc:
            break
    weights = [p.detach().numpy().copy() for p in model.policy.parameters()]
    return weights, np.array(actions)


def test_learning_is_the_same_without_the_distribution_checks() -> None:
    before = torch.distributions.Distribution._validate_args
    try:
        checked, checked_actions = _learn(True)
        unchecked, unchecked_actions = _learn(False)
    finally:
        torch.distributions.Distribution.set_default_validate_args(before)
    assert len(checked) == len(unchecked) > 0
    for a, b in zip(checked, unchecked, strict=True):
        np.testing.assert_array_equal(a, b)
    np.testing.assert_array_equal(checked_actions, unchecked_actions)


def test_the_agents_set_up_turns_the_checks_off() -> None:
    before = torch.distributions.Distribution._validate_args
    try:
        torch.distributions.Distribution.set_default_validate_args(True)
        skip_distribution_checks()
        assert torch.distributions.Distribution._validate_args is False
        torch.distributions.Distribution.set_default_validate_args(True)
        use_one_thread()
        assert torch.distributions.Distribution._validate_args is False
    finally:
        torch.distributions.Distribution.set_default_validate_args(before)

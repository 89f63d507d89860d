"""A masked env as RLlib's action-masking modules expect it: a ``Dict`` observation
``{"observations": <the env's observation>, "action_mask": <1.0 allowed, 0.0 masked>}``.

RLlib (new API stack) has no ``action_masks()`` convention as sb3-contrib's MaskablePPO does;
its action-masking ``RLModule`` reads the mask from the observation instead and adds
``log(mask)`` to the action logits. :class:`ActionMaskObservation` builds that observation
from the env's ``action_masks()`` after every ``reset`` and ``step``, and checks every action
against the mask it last published: a masked action raises :class:`InvalidActionError`
instead of reaching the env (whose ``invalid_action`` rule would otherwise quietly turn it
into a default). Needs only gymnasium; works with or without Ray installed.

``Discrete`` actions: one mask entry per action. ``MultiDiscrete`` actions: the heads' masks
concatenated (sb3-contrib's layout, and the layout of RLlib's concatenated logits); each
head's choice is checked against its own part.
"""

from __future__ import annotations

from typing import Any

import gymnasium as gym
import numpy as np

from dlcluster_gym.errors import ConfigError, InvalidActionError

OBS_KEY = "observations"
MASK_KEY = "action_mask"


class ActionMaskObservation(gym.Wrapper):
    """``env`` with its action mask inside a ``Dict`` observation, masked actions refused.

    ``heads``: choices per action head; ``actions_checked``: actions that passed the mask
    check since construction.
    """

    def __init__(self, env: gym.Env) -> None:
        super().__init__(env)
        space = env.action_space
        if isinstance(space, gym.spaces.Discrete):
            self._heads = np.array([int(space.n)])
        elif isinstance(space, gym.spaces.MultiDiscrete) and space.nvec.ndim == 1:
            self._heads = space.nvec.astype(np.int64)
        else:
            raise ConfigError(
                f"ActionMaskObservation needs a Discrete or 1-D MultiDiscrete action space, "
                f"got {space}"
            )
        if not callable(getattr(env.unwrapped, "action_masks", None)):
            raise ConfigError(
                f"ActionMaskObservation needs an env with action_masks(); "
                f"{type(env.unwrapped).__name__} has none"
            )
        if not isinstance(env.observation_space, gym.spaces.Box):
            raise ConfigError(
                "ActionMaskObservation needs a flat Box observation (make the env with "
                f"observation='flat'), got {env.observation_space}"
            )
        self.heads: tuple[int, ...] = tuple(int(n) for n in self._heads)
        """Choices per action head (one head for ``Discrete``)."""
        self._offsets = np.concatenate(([0], np.cumsum(self._heads)[:-1]))
        size = int(self._heads.sum())
        self.observation_space = gym.spaces.Dict(
            {
                OBS_KEY: env.observation_space,
                MASK_KEY: gym.spaces.Box(0.0, 1.0, (size,), dtype=np.float32),
            }
        )
        self._mask = np.ones(size, dtype=bool)
        self.actions_checked = 0

    def _observe(self, obs: np.ndarray) -> dict[str, np.ndarray]:
        mask = np.asarray(self.env.unwrapped.action_masks(), dtype=bool).reshape(-1)
        if mask.shape != self._mask.shape:
            raise ConfigError(
                f"{type(self.env.unwrapped).__name__}.action_masks() has {mask.size} entries, "
                f"the action space {self.env.action_space} needs {self._mask.size}"
            )
        self._mask = mask.copy()
        return {OBS_KEY: obs, MASK_KEY: mask.astype(np.float32)}

    def reset(
        self, *, seed: int | None = None, options: dict[str, Any] | None = None
    ) -> tuple[dict[str, np.ndarray], dict[str, Any]]:
        obs, info = self.env.reset(seed=seed, options=options)
        return self._observe(obs), info

    def step(self, action: Any) -> tuple[dict[str, np.ndarray], float, bool, bool, dict[str, Any]]:
        chosen = np.asarray(action, dtype=np.int64).reshape(-1)
        if chosen.size != self._heads.size or (chosen < 0).any() or (chosen >= self._heads).any():
            raise InvalidActionError(
                f"action {action!r} is outside the action space {self.env.action_space}"
            )
        allowed = self._mask[self._offsets + chosen]
        if not allowed.all():
            raise InvalidActionError(
                f"masked action {action!r} taken (allowed now: "
                f"{np.flatnonzero(self._mask).tolist()} in the concatenated mask); an "
                "action-masking policy must never choose it"
            )
        self.actions_checked += 1
        env_action = int(chosen[0]) if isinstance(self.env.action_space, gym.spaces.Discrete) \
            else chosen  # fmt: skip
        obs, reward, terminated, truncated, info = self.env.step(env_action)
        return self._observe(obs), float(reward), terminated, truncated, info


def make_masked_env(env_id: str = "DLCluster/Scheduler-v3", **kwargs: Any) -> ActionMaskObservation:
    """``gym.make(env_id, **kwargs)`` wrapped in :class:`ActionMaskObservation`."""
    import dlcluster_gym  # noqa: F401  (registers the envs in this process, e.g. a Ray worker)

    return ActionMaskObservation(gym.make(env_id, **kwargs))

"""Policies acting in Scheduler-v3 (``actions="per-job"``): one answer ``(act, candidate)``
about the focus job per step (``dlcluster_gym.envs.per_job``). Not paper policies: the
reference lines of the learning curves and possible warm-start teachers. They read the env's
state through its view (observable facts only), with SB3's ``predict`` signature."""

from __future__ import annotations

from typing import Any, ClassVar

import gymnasium as gym
import numpy as np

from dlcluster_gym.baselines.queue_policies import _EnvActing
from dlcluster_gym.envs.per_job import HOUR_S, PREEMPTING, WAITING
from dlcluster_gym.errors import ConfigError


class _PerJobActing(_EnvActing):
    """``predict`` from the env's state (``_EnvActing``); subclasses implement ``act``."""

    env_kwargs: ClassVar[dict[str, Any]] = {"actions": "per-job"}

    def __init__(self, env: gym.Env) -> None:
        self.env = env.unwrapped
        if not getattr(self.env, "per_job", False):
            raise ConfigError(
                f"{type(self).__name__} acts in Scheduler-v3 (actions='per-job'); this env is "
                f"{self.env.env_name}"
            )

    def act(self) -> np.ndarray:
        raise NotImplementedError

    def _no(self) -> np.ndarray:
        """Defer or keep (a start on the most consolidated candidate where defer is masked)."""
        pj = self.env._pj
        if pj is None:
            return np.array([0, 0], dtype=np.int64)
        return pj.default()


class PerJobRandom(_PerJobActing):
    """Each head uniform over its valid values (start or defer, preempt or keep: even odds)."""

    def __init__(self, env: gym.Env, seed: int = 0) -> None:
        super().__init__(env)
        self.rng = np.random.default_rng(seed)

    def act(self) -> np.ndarray:
        m = self.env.action_masks()
        heads = (np.flatnonzero(m[:2]), np.flatnonzero(m[2:]))
        return np.array([h[self.rng.integers(h.size)] for h in heads], dtype=np.int64)


class PerJobGreedy(_PerJobActing):
    """Start the focus job on its best possible tier (one machine if it fits on one, else one
    rack, else the network candidate) when that candidate exists, else defer; never preempt.
    With ``margin_gpu_h`` set (``las``), preempt a running focus job that has attained that
    many GPU-hours more than the least-attained job it would make room for (least attained
    service first, as Tiresias's 2D-LAS without queues)."""

    def __init__(self, env: gym.Env, margin_gpu_h: float | None = None) -> None:
        super().__init__(env)
        if margin_gpu_h is not None and not (
            isinstance(margin_gpu_h, int | float) and not isinstance(margin_gpu_h, bool)
            and 0 <= margin_gpu_h < float("inf")
        ):  # fmt: skip
            raise ConfigError(f"margin_gpu_h must be a finite number >= 0, got {margin_gpu_h!r}")
        self.margin_s = None if margin_gpu_h is None else float(margin_gpu_h) * HOUR_S

    def act(self) -> np.ndarray:
        env = self.env
        pj = env._pj
        if pj is None or not pj.phase:
            return self._no()
        m = env.action_masks()
        job = pj.focus
        if pj.phase == WAITING:
            return np.array([1, 0]) if m[2] else self._no()  # 0: its most consolidated tier
        assert pj.phase == PREEMPTING
        if self.margin_s is None:
            return self._no()
        att = float(env.view.live(np.array([job]))[2][0])
        blocked = env._slots_w
        least = float(env.engine.attained[blocked].min()) if blocked.size else att
        return np.array([1, 0]) if att - least > self.margin_s else self._no()


class PerJobLAS(PerJobGreedy):
    """``PerJobGreedy`` with preemption by least attained service, margin 4 GPU-hours (the
    margin of the ``las-slots`` teacher). It preempts only where the env offers preemption
    (``preemption=True``, which it declares in ``env_kwargs``); without it, it acts as
    ``PerJobGreedy``."""

    env_kwargs: ClassVar[dict[str, Any]] = {"actions": "per-job", "preemption": True}

    def __init__(self, env: gym.Env, margin_gpu_h: float = 4.0) -> None:
        super().__init__(env, margin_gpu_h)

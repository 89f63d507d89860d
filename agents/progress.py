"""Progress lines while a stable-baselines3 model learns: steps done, episodes finished, the
mean return of the recent episodes and the latest validation average JCT.

:class:`Progress` is an SB3 callback. It checks ``time.monotonic()`` at every step and prints
one line (``print(..., flush=True)``) once ``every_s`` seconds of wall time have passed since
the last line, and one at the end of training, such as (one line)::

    progress: 98,304 steps (341/s, 0:04:48), 412 episodes, mean return -35.2 (last 20),
    validation avg JCT 49.87 h (seed 501 at 50,000 steps)

``every_s`` defaults to ``DLCLUSTER_PROGRESS_S`` (seconds; ``inf`` prints nothing) or 30.
With a validation env it runs one deterministic episode of the model on a fixed validation
seed every ``validate_every`` steps (``imitation.average_jct_h``); the result appears in the
next line and in ``validations``. Validation seeds are 501 and up (docs/agents.md): the
held-out seeds 101-110 and 201-210 report results and are refused here. Validation acts
deterministically in its own env, so the training run is the same with or without it.
"""

from __future__ import annotations

import math
import os
import time
from collections import deque
from datetime import timedelta

import gymnasium as gym
from stable_baselines3.common.callbacks import BaseCallback

from dlcluster_gym.errors import ConfigError

INTERVAL_ENV = "DLCLUSTER_PROGRESS_S"
"""Environment variable: seconds of wall time between progress lines (``inf``: none)."""
DEFAULT_INTERVAL_S = 30.0
HELD_OUT_SEEDS = frozenset((*range(101, 111), *range(201, 211)))
"""The seeds that report held-out results; never used to validate."""


def progress_interval_s(every_s: float | None = None) -> float:
    """``every_s`` if given, else ``DLCLUSTER_PROGRESS_S``, else 30; a number >= 0."""
    source = "every_s"
    if every_s is None:
        raw = os.environ.get(INTERVAL_ENV, "").strip()
        if not raw:
            return DEFAULT_INTERVAL_S
        source = INTERVAL_ENV
        try:
            every_s = float(raw)
        except ValueError:
            raise ConfigError(f"{INTERVAL_ENV} must be a number of seconds, got {raw!r}") from None
    if isinstance(every_s, bool) or not isinstance(every_s, int | float):
        raise ConfigError(f"{source} must be a number of seconds, got {every_s!r}")
    if math.isnan(every_s) or every_s < 0:
        raise ConfigError(f"{source} must be >= 0 seconds (inf: no lines), got {every_s!r}")
    return float(every_s)


class Progress(BaseCallback):
    """Print a progress line every ``every_s`` seconds while learning (module docstring).

    ``validation_env``: an env the model acts in (the kind it trains on) to validate on
    ``validation_seed`` every ``validate_every`` steps; None validates nothing. ``window``: how
    many of the latest finished episodes the mean return covers. Episode returns are the
    ``Monitor`` wrapper's (``make_vec_env`` adds it): raw rewards, before any
    ``VecNormalize`` scaling.
    """

    def __init__(
        self,
        validation_env: gym.Env | None = None,
        validation_seed: int = 501,
        validate_every: int = 50_000,
        every_s: float | None = None,
        window: int = 20,
    ) -> None:
        super().__init__()
        if isinstance(validation_seed, bool) or not isinstance(validation_seed, int):
            raise ConfigError(f"validation_seed must be an integer, got {validation_seed!r}")
        if validation_seed in HELD_OUT_SEEDS:
            raise ConfigError(
                f"validation_seed {validation_seed} is a held-out seed (101-110, 201-210 report "
                "results); validate on 501 and up"
            )
        for name, value in (("validate_every", validate_every), ("window", window)):
            if isinstance(value, bool) or not isinstance(value, int) or value < 1:
                raise ConfigError(f"{name} must be a positive integer, got {value!r}")
        self.every_s = progress_interval_s(every_s)
        self.validation_env = validation_env
        self.validation_seed = validation_seed
        self.validate_every = validate_every
        self.episodes = 0
        self.returns: deque[float] = deque(maxlen=window)
        self.validations: list[tuple[int, float]] = []
        """``(steps, average JCT in hours)`` of each validation."""
        self.lines: list[str] = []
        """The lines printed."""
        self._t0 = self._last = 0.0
        self._next_validation = validate_every

    def _on_training_start(self) -> None:
        self._t0 = self._last = time.monotonic()
        self._next_validation = self.num_timesteps + self.validate_every

    def _on_step(self) -> bool:
        infos = self.locals.get("infos", ())
        dones = self.locals.get("dones", [False] * len(infos))
        for info, done in zip(infos, dones, strict=False):
            if done:
                self.episodes += 1
                if "episode" in info:
                    self.returns.append(float(info["episode"]["r"]))
        if self.validation_env is not None and self.num_timesteps >= self._next_validation:
            self._validate()
        if time.monotonic() - self._last >= self.every_s:
            self._print()
        return True

    def _on_training_end(self) -> None:
        if math.isfinite(self.every_s):
            self._print()

    def _validate(self) -> None:
        from dlcluster_gym.agents.imitation import average_jct_h

        jct = average_jct_h(self.validation_env, self.model, [self.validation_seed])
        self.validations.append((self.num_timesteps, jct))
        while self._next_validation <= self.num_timesteps:
            self._next_validation += self.validate_every

    def line(self) -> str:
        """The progress line now."""
        wall = max(time.monotonic() - self._t0, 1e-9)
        parts = [
            f"progress: {self.num_timesteps:,} steps ({self.num_timesteps / wall:,.0f}/s, "
            f"{timedelta(seconds=round(wall))})",
            f"{self.episodes:,} episodes",
        ]
        if self.returns:
            mean = sum(self.returns) / len(self.returns)
            parts.append(f"mean return {mean:,.1f} (last {len(self.returns)})")
        else:
            parts.append("mean return n/a (no episode finished)")
        if self.validations:
            steps, jct = self.validations[-1]
            shown = f"{jct:.2f} h" if math.isfinite(jct) else "inf (jobs left unfinished)"
            parts.append(
                f"validation avg JCT {shown} (seed {self.validation_seed} at {steps:,} steps)"
            )
        elif self.validation_env is not None:
            parts.append(f"validation every {self.validate_every:,} steps (none yet)")
        return ", ".join(parts)

    def _print(self) -> None:
        text = self.line()
        self.lines.append(text)
        print(text, flush=True)
        self._last = time.monotonic()

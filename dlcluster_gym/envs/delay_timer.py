"""``DLCluster/DelayTimer-v1`` (and ``-v0``): the agent sets Dally's delay timers per
GPU-demand class."""

from __future__ import annotations

import math
from collections.abc import Generator, Mapping
from pathlib import Path
from typing import Any

import gymnasium as gym
import numpy as np

from dlcluster_gym.config import ScenarioConfig
from dlcluster_gym.envs.base import (
    COMMON_KWARGS,
    ClusterEnv,
    check_kwargs,
    check_mapping,
    check_reset_options,
    finite_number,
)
from dlcluster_gym.envs.features import (
    CLUSTER_FEATURES,
    ClusterFeatures,
    count_feature,
    time_feature,
)
from dlcluster_gym.envs.versions import version_name, warn_leaks
from dlcluster_gym.errors import ConfigError, InvalidActionError
from dlcluster_gym.scheduler import is_clairvoyant, make_policy
from dlcluster_gym.sim.view import ClusterView

HOUR = 3600.0
DEMAND_CLASSES: tuple[str, ...] = ("1", "2", "4", "8", "16", "32", ">=64")
NUM_CLASSES = len(DEMAND_CLASSES)
CLASS_DEMAND = (1, 2, 4, 8, 16, 32, 64)  # representative demand of each class
MACHINE_LEVEL, RACK_LEVEL = 0, 1  # Tier values of the auto-tuner's lists
CLASS_FEATURES: tuple[str, ...] = (
    "waiting",  # waiting jobs of the class (log scale)
    "waiting_demand",  # their GPUs / cluster GPUs
    "mean_starvation",  # mean and max time since they entered the queue (log scale)
    "max_starvation",
    "tuner_machine",  # Algorithm 2's current machine and rack timers (log scale)
    "tuner_rack",
    "recent_wait",  # mean of the auto-tuner's recent acceptance waits, both levels
    "samples",  # how many such samples (log scale)
    "timer_machine",  # the timers currently set (action), / max_timer_s
    "timer_rack_extra",
)
_NF = len(CLASS_FEATURES)
OBS_SIZE = NUM_CLASSES * _NF + len(CLUSTER_FEATURES)
OBS_INDEX: dict[str, int] = {
    **{
        f"{cls}.{k}": c * _NF + i
        for c, cls in enumerate(DEMAND_CLASSES)
        for i, k in enumerate(CLASS_FEATURES)
    },
    **{f"cluster.{k}": NUM_CLASSES * _NF + i for i, k in enumerate(CLUSTER_FEATURES)},
}
DELAY_KWARGS = (*COMMON_KWARGS, "decision_period_s", "max_timer_s", "dally_params",
                "wait_retry_s")  # fmt: skip


def demand_class(demand: int) -> int:
    """Class index of a GPU demand: 1, 2, (2,4], (4,8], ..., (16,32], >32."""
    return min(max(math.ceil(math.log2(max(demand, 1))), 0), NUM_CLASSES - 1)


def timers_to_action(machine_s: np.ndarray, rack_extra_s: np.ndarray, max_s: float) -> np.ndarray:
    """Inverse of the env's action mapping: timers (seconds) -> action in [-1, 1]."""
    a = np.concatenate((machine_s, rack_extra_s)) / max_s * 2.0 - 1.0
    return np.clip(a, -1.0, 1.0).astype(np.float32)


class TimerObserver:
    """Builds DelayTimer-v0 observations in one engine run under a Dally ``base`` (used by
    the env, and by ``TimerPolicyScheduler`` to let an env policy act in a native run)."""

    def __init__(
        self, view: ClusterView, base: Any, max_timer_s: float, done_of: str = "arrived"
    ) -> None:
        self.view = view
        self.base = base
        self.max_timer_s = max_timer_s
        self.num_gpus = float(view.cluster.num_gpus)
        # per-run constant (read for waiting jobs only)
        self.demand = np.array([j.num_gpus for j in view._e.jobs], dtype=np.int64)
        self.cls = np.array([demand_class(int(d)) for d in self.demand], dtype=np.int64)
        self._cluster = ClusterFeatures(view, done_of)

    def autotuner_timers(self) -> np.ndarray:
        """Algorithm 2's current (T_Mc, T_Rk) per class, for the class's representative
        demand (the manual defaults where a list is empty), shape (classes, 2)."""
        base = self.base
        out = np.empty((NUM_CLASSES, 2))
        now = self.view.now
        for c, d in enumerate(CLASS_DEMAND):
            tm = base.history.timer(MACHINE_LEVEL, d, now)
            tr = base.history.timer(RACK_LEVEL, d, now)
            out[c, 0] = base.default_machine_timer_s if tm is None else tm
            out[c, 1] = base.default_rack_timer_s if tr is None else tr
        return out

    def observe(self, timers: np.ndarray) -> np.ndarray:
        """The observation now, with ``timers`` ((classes, 2) machine, extra rack seconds)
        as the timers currently set."""
        o = np.zeros(OBS_SIZE, dtype=np.float32)
        view = self.view
        now = view.now
        waiting = np.asarray(view.waiting(), dtype=np.int64)
        starv = now - np.asarray(view.wait_since)[waiting]
        cls = self.cls[waiting]
        tuner = self.autotuner_timers()
        hist = self.base.history
        for c in range(NUM_CLASSES):
            b = c * _NF
            sel = cls == c
            k = int(sel.sum())
            o[b] = count_feature(k)
            if k:
                o[b + 1] = min(float(self.demand[waiting[sel]].sum()) / self.num_gpus, 1.0)
                o[b + 2] = time_feature(float(starv[sel].mean()))
                o[b + 3] = time_feature(float(starv[sel].max()))
            o[b + 4] = time_feature(tuner[c, 0])
            o[b + 5] = time_feature(tuner[c, 1])
            d = CLASS_DEMAND[c]
            samples = hist.samples(MACHINE_LEVEL, d, now) + hist.samples(RACK_LEVEL, d, now)
            if samples:
                o[b + 6] = time_feature(float(np.mean(samples)))
            o[b + 7] = count_feature(len(samples))
            o[b + 8] = timers[c, 0] / self.max_timer_s
            o[b + 9] = timers[c, 1] / self.max_timer_s
        self._cluster.compute(o[NUM_CLASSES * _NF :])
        return o


def action_to_timers(action: Any, max_timer_s: float, where: str = "DelayTimer-v0") -> np.ndarray:
    """An action (machine timers then extra rack timers, in [-1, 1]) as seconds, shape
    (classes, 2); NaN, wrong sizes and values outside [-1, 1] are clear errors."""
    try:
        a = np.asarray(action, dtype=np.float64).reshape(-1)
    except (TypeError, ValueError):
        raise InvalidActionError(
            f"{where}: action must be {2 * NUM_CLASSES} numbers in [-1, 1], got {action!r}"
        ) from None
    if a.size != 2 * NUM_CLASSES:
        raise InvalidActionError(
            f"{where}: action must have {2 * NUM_CLASSES} values (machine timers then extra "
            f"rack timers for classes {', '.join(DEMAND_CLASSES)}), got {a.size}"
        )
    bad = np.flatnonzero(~np.isfinite(a) | (a < -1.0 - 1e-6) | (a > 1.0 + 1e-6))
    if bad.size:
        i = int(bad[0])
        which = "machine" if i < NUM_CLASSES else "extra rack"
        raise InvalidActionError(
            f"{where}: action[{i}] ({which} timer of class {DEMAND_CLASSES[i % NUM_CLASSES]}) "
            f"= {a[i]!r}; allowed: finite values in [-1, 1]"
        )
    seconds = (np.clip(a, -1.0, 1.0) + 1.0) / 2.0 * max_timer_s
    return seconds.reshape(2, NUM_CLASSES).T.copy()


class DelayTimerEnv(ClusterEnv):
    """Set Dally's machine and rack delay timers for each GPU-demand class.

    ## Description

    The cluster runs Dally (offers in increasing Nw_sens, Algorithm 1 delay scheduling,
    network-sensitive preemption); only the delay timers come from the agent instead of the
    auto-tuner (Algorithm 2). A decision point is the first scheduling instant at or after
    every ``decision_period_s`` of simulated time (an instant is an arrival, a completion or a
    timer expiring); the timers set there hold until the next decision point. Dally's 4.3.2
    rules still apply: a job too large for one machine has no machine timer, one too large
    for a rack has no timers. The auto-tuner keeps recording acceptance waits, so its
    estimate is part of the observation.

    ## Action Space

    ``Box(-1, 1, (14,), float32)``: 7 machine timers then 7 extra rack timers, one per demand
    class (1, 2, 4, 8, 16, 32, >=64 GPUs; a demand in (2^(k-1), 2^k] is in class 2^k), each
    mapped linearly from [-1, 1] to [0, ``max_timer_s``] (48 h by default). A job's rack
    timer T_Rk (compared with its total starvation, Algorithm 1) is machine + extra.
    Actions outside [-1, 1] or NaN are errors.

    ## Observation Space

    ``Box(0, 1, (80,), float32)``: per demand class 10 features (``CLASS_FEATURES``: waiting
    jobs and their GPUs, mean and max starvation, the auto-tuner's current timers, recent
    acceptance waits and their count, the timers currently set) and 10 cluster features
    (``CLUSTER_FEATURES``: free capacity per tier, fragmentation, queue). ``OBS_INDEX`` maps
    names to positions. Every feature is observed (the waiting queue, Dally's auto-tuner
    state, the timers set, the cluster); ``done_jobs`` is finished / arrived jobs (v1), or
    finished / all jobs of the episode with ``done_jobs_of="workload"`` (v0, an oracle
    feature: such an env and an agent trained on it are clairvoyant, ``clairvoyant``).

    ## Rewards

    As in Placement: named components in ``info["rewards"]`` (``jct`` = -(jobs in the
    system) x elapsed time / ``reward_scale_s``, summing to minus the total JCT;
    optional ``makespan`` and ``comm``), combined with ``reward_weights``.

    ## Starting State

    ``reset(seed)`` builds the scenario's workload with that seed and runs to the first
    decision point (the first arrival).

    ## Episode End

    Terminated when every job has finished; truncated only if the scenario's
    ``max_sim_time_s`` stops the run first. The final ``info["results"]`` is the results
    summary.

    ## Arguments

    ``scenario``, ``scenario_overrides``, ``scenarios`` (sampled per reset, ``envs.sampling``),
    ``decision_period_s`` (3600), ``max_timer_s``
    (48 h), ``dally_params`` (Dally's own parameters, e.g. ``preemption``), ``reward_weights``,
    ``reward_scale_s``, ``wait_retry_s``, ``done_jobs_of`` (``arrived``; ``workload`` in v0),
    ``render_mode``, ``traces_dir``. ``clairvoyant`` (read-only) says whether the env reads
    ground truth.

    ## Version History

    * v1: ``done_jobs`` = finished / arrived jobs (``done_jobs_of="arrived"``).
    * v0: initial version (``done_jobs_of="workload"``; warns when made, kept for the
      checkpoints trained on it). Later changes to the engine (the network model) and to
      base Dally (as its paper wrote it; its move test on estimates) apply under every
      version without a bump: per-job results of runs made before them are not reproduced
      by today's v0.
    """

    env_name = "DelayTimer-v1"

    def __init__(
        self,
        scenario: str | Path | Mapping[str, Any] | ScenarioConfig | None = None,
        *,
        decision_period_s: float = 3600.0,
        max_timer_s: float = 48 * HOUR,
        dally_params: Mapping[str, Any] | None = None,
        wait_retry_s: float = 3600.0,
        **kwargs: Any,
    ) -> None:
        version_kw = {"done_jobs_of": kwargs.get("done_jobs_of", "arrived")}
        self.env_name = version_name("DelayTimer", version_kw)
        check_kwargs(self.env_name, kwargs, DELAY_KWARGS)
        super().__init__(scenario, **kwargs)
        for name, v in (
            ("decision_period_s", decision_period_s),
            ("max_timer_s", max_timer_s),
            ("wait_retry_s", wait_retry_s),
        ):
            if not (finite_number(v) and v > 0):
                raise ConfigError(f"{self.env_name}: {name} must be a finite number > 0, got {v!r}")
        self.decision_period_s = float(decision_period_s)
        self.max_timer_s = float(max_timer_s)
        self.wait_retry_s = float(wait_retry_s)
        check_mapping(self.env_name, "dally_params", dally_params)
        self.dally_params = dict(dally_params or {})
        probe = make_policy("dally", **self.dally_params)  # bad parameters fail here, clearly
        self._base_clairvoyant = is_clairvoyant(probe)
        warn_leaks("DelayTimer", self.env_name, version_kw)
        self._init_kwargs.update(
            decision_period_s=decision_period_s,
            max_timer_s=max_timer_s,
            dally_params=dally_params,
            wait_retry_s=wait_retry_s,
        )
        self.action_space = gym.spaces.Box(-1.0, 1.0, (2 * NUM_CLASSES,), np.float32)
        self.observation_space = gym.spaces.Box(0.0, 1.0, (OBS_SIZE,), np.float32)
        self._timers = np.zeros((NUM_CLASSES, 2))  # (machine, rack extra) seconds
        self._at_decision = False

    @property
    def clairvoyant(self) -> bool:
        """Whether the env reads ground truth: the episode's job count
        (``done_jobs_of="workload"``) or a clairvoyant Dally (``dally_params``, e.g.
        ``remaining="known"``). An agent trained on it is clairvoyant too."""
        return self.done_jobs_of == "workload" or self._base_clairvoyant

    # ------------------------------------------------------------------ episode
    def _make_base(self) -> Any:
        base = make_policy("dally", **self.dally_params)
        base.timer_override = self._timer_for
        return base

    def _timer_for(self, demand: int) -> tuple[float, float]:
        tm, extra = self._timers[demand_class(demand)]
        return float(tm), float(tm + extra)

    def _first_instant(self, view: ClusterView) -> None:
        self._observer = TimerObserver(view, self.base, self.max_timer_s, self.done_jobs_of)
        self._next_decision = 0.0

    def _decide(self, view: ClusterView) -> Generator[ClusterView, np.ndarray, Any]:
        if view.now >= self._next_decision:
            self._timers = yield view
            period = self.decision_period_s
            self._next_decision = (math.floor(view.now / period) + 1.0) * period
        return self.base.schedule(view)

    def reset(
        self, *, seed: int | None = None, options: dict[str, Any] | None = None
    ) -> tuple[np.ndarray, dict[str, Any]]:
        check_reset_options(self.env_name, options, seed)
        super().reset(seed=seed)
        self._timers = np.zeros((NUM_CLASSES, 2))
        self._at_decision = self._start(self._episode_seed_for(seed)) is not None
        return self._observe(), self._info({})

    def step(self, action: Any) -> tuple[np.ndarray, float, bool, bool, dict[str, Any]]:
        if self._gen is None:
            raise gym.error.ResetNeeded("call reset() before step()")
        if not self._at_decision:
            raise gym.error.ResetNeeded("the episode is over; call reset()")
        timers = action_to_timers(action, self.max_timer_s, self.env_name)
        self._actions.append(timers)
        self._at_decision = self._advance(timers) is not None
        obs = self._observe()
        reward, comps = self._take_rewards()
        terminated = truncated = False
        if self.results is not None:
            truncated = self.results.summary.get("jobs_unfinished", 0) > 0
            terminated = not truncated
        return obs, reward, terminated, truncated, self._info({"rewards": comps})

    def _restore(self, seed: int, actions: list[Any]) -> None:
        self._at_decision = self._start(seed) is not None
        for timers in actions:
            self._actions.append(timers)
            self._at_decision = self._advance(timers) is not None
        if actions:  # the last step took its rewards; with none, reset's accrual stays
            self._pending = dict.fromkeys(self._pending, 0.0)

    # ------------------------------------------------------------------ observation
    def autotuner_timers(self) -> np.ndarray:
        """Algorithm 2's current (T_Mc, T_Rk) per class (see ``TimerObserver``)."""
        return self._observer.autotuner_timers()

    def _observe(self) -> np.ndarray:
        if self.view is None or self.results is not None:
            return np.zeros(OBS_SIZE, dtype=np.float32)
        return self._observer.observe(self._timers)

    def _info(self, info: dict[str, Any]) -> dict[str, Any]:
        if self.view is not None and self.results is None:
            info["timers_s"] = {
                cls: (float(self._timers[c, 0]), float(self._timers.sum(axis=1)[c]))
                for c, cls in enumerate(DEMAND_CLASSES)
            }
            info["autotuner_timers_s"] = {
                cls: tuple(map(float, t))
                for cls, t in zip(DEMAND_CLASSES, self.autotuner_timers(), strict=True)
            }
        info["time_s"] = self.engine.now if self.engine is not None else 0.0
        return self._final_info(info)

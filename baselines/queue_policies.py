"""The paper heuristics (and ``srw``) as policies acting in ``DLCluster/Scheduler-v0``.

Each policy holds the native scheduler, calls it on the env's view once per decision instant
and plays its actions back one env step at a time: a ``Start`` becomes "start the job of that
waiting slot on the candidate whose GPUs are exactly those", a ``Preempt`` followed by a
``Start`` of the same job (Dally 4.3.1's relocation) becomes a move with ``move_as="restart"``,
a ``Migrate`` (Gandiva) a move with ``move_as="migrate"``, a lone ``Preempt`` (Tiresias) a
preempt action, a ``WakeUp`` goes to ``env.wake_up`` at once; then "no more starts now". In an
env with ``requeue=True`` (Dally 4.3's preemption) a ``Preempt`` is always a preempt action and
a later ``Start`` of the same job at the same instant restarts it from the waiting slots, on
any free GPUs, its own included. An action the env cannot express (a job outside the slots,
GPUs that are no candidate) is a clear error, never a silent substitute. So a heuristic's run
in the env equals its native run exactly when the env's candidates, slots and instants express
every decision it makes, which is what tests/test_scheduler_env.py checks.

These policies read the env's state (its view), not the observation: they act in one env
(not a vector of envs). ``env_kwargs`` are the env arguments each needs for its full
mechanism (preemption, move semantics, slot orders that show its picks first, slot windows
of 64 so that the jobs it picks past the ones it declines are in a slot, and a decision point
at every engine instant, ``skip_trivial=False``, since they keep timers); in an env
without preemption the native scheduler runs with its preemption/migration off.
"""

from __future__ import annotations

from typing import Any, ClassVar

import gymnasium as gym
import numpy as np

from dlcluster_gym.errors import ConfigError
from dlcluster_gym.scheduler import make_policy
from dlcluster_gym.sim.actions import Migrate, Preempt, Start, WakeUp

WINDOWS: dict[str, Any] = {"max_waiting": 64, "max_running": 64, "skip_trivial": False}


class NativeInScheduler:
    """A native scheduler acting through Scheduler-v0's actions (see the module docstring)."""

    native = "fcfs"
    env_kwargs: ClassVar[dict[str, Any]] = {"order": "arrival", **WINDOWS}
    preemption_param: str | None = None  # the native parameter that turns preemption off

    def __init__(self, env: gym.Env, **params: Any) -> None:
        self.env = env.unwrapped
        self.action_space = env.action_space
        self.observation_space = env.observation_space
        self.params = dict(params)
        self._engine: Any = None
        self._instant = -1
        self._queue: list[tuple[str, int, Any, Any]] = []

    def _native(self) -> Any:
        params = dict(self.params)
        if self.preemption_param and not self.env.preemption:
            params.setdefault(self.preemption_param, False)
        return make_policy(self.native, **params)

    def predict(
        self,
        observation: Any,
        state: Any = None,
        episode_start: np.ndarray | None = None,
        deterministic: bool = True,
    ) -> tuple[np.ndarray, Any]:
        env = self.env
        if env.engine is not self._engine:  # a new episode
            self._engine = env.engine
            self.policy = self._native()
            self.policy.reset(env.view, env.engine.rng)
            self._instant = -1
        if env.instant_index != self._instant:  # a new decision instant
            self._instant = env.instant_index
            self._queue, wakeups = self._translate(self.policy.schedule(env.view))
            for t in wakeups:  # sent with this instant's decisions, however it ends
                env.wake_up(t)
        return np.asarray(self._next()), state

    def _translate(self, actions: Any) -> tuple[list, list]:
        acts, out, wake = list(actions), [], []
        i = 0
        while i < len(acts):
            a = acts[i]
            nxt = acts[i + 1] if i + 1 < len(acts) else None
            pair = isinstance(a, Preempt) and isinstance(nxt, Start) and nxt.job == a.job
            if pair and not self.env.requeue:
                out.append(("move", a.job, nxt.gpus, "restart"))
                i += 2
                continue
            if isinstance(a, Preempt):
                out.append(("preempt", a.job, None, None))
            elif isinstance(a, Start):
                out.append(("start", a.job, a.gpus, None))
            elif isinstance(a, Migrate):
                out.append(("move", a.job, a.gpus, "migrate"))
            elif isinstance(a, WakeUp):
                wake.append(a.at_s)
            else:
                raise ConfigError(f"Scheduler-v0 cannot express {type(a).__name__} of "
                                  f"{self.native!r}")  # fmt: skip
            i += 1
        return out, wake

    def _next(self) -> int:
        env = self.env
        if not self._queue:
            return 0
        kind, job, gpus, mode = self._queue.pop(0)
        where = f"{self.native}: {kind} job {job} at t={env.engine.now:.0f}s"
        if kind != "preempt" and mode is not None and mode != env.move_as:
            raise ConfigError(f"{where}: needs the env's move_as={mode!r}, "
                              f"it has {env.move_as!r}")  # fmt: skip
        cand = 0
        if gpus is not None:
            want = np.asarray(gpus, dtype=np.int64)
            n = int(env.obs_state.demand[job])
            for c in range(1, 7):
                g = env.candidate_gpus(n, c)
                if g is not None and np.array_equal(g, want):
                    cand = c
                    break
            else:
                raise ConfigError(f"{where}: its GPUs are none of the env's candidates")
        a = env.encode(kind, job, cand)
        if a is None:
            raise ConfigError(
                f"{where}: the job is in no slot of the env (max_waiting={env.K}, "
                f"max_running={env.R}, preemption={env.preemption}); raise them"
            )
        if not env.action_masks()[a]:
            raise ConfigError(f"{where}: the env masks that action")
        return a


class FCFSInScheduler(NativeInScheduler):
    """``fcfs``: arrival order, head-of-line blocking, first fit."""

    native = "fcfs"
    env_kwargs: ClassVar[dict[str, Any]] = {"order": "arrival", **WINDOWS}


class DallyInScheduler(NativeInScheduler):
    """``dally``: Nw_sens order, Algorithm 1 with auto-tuned timers and the paper's
    network-sensitive preemption (Dally 4.3, native ``preemption="requeue"``): the suffering
    jobs are preempted back into the wait queue and re-offered the free GPUs, their own
    included, in increasing Nw_sens at the same instant. It needs the env's ``requeue=True``
    (its ``env_kwargs``). In an env with preemption but without ``requeue`` it runs the
    relocation variant (native ``preemption="relocate"``, a move with ``move_as="restart"``),
    in one without preemption the no-preemption variant."""

    native = "dally"
    env_kwargs: ClassVar[dict[str, Any]] = {
        "order": "nw_sens",
        "preemption": True,
        "requeue": True,
        "running_order": "wide",
        **WINDOWS,
    }
    preemption_param = "preemption"

    def _native(self) -> Any:
        if self.env.preemption:
            self.params.setdefault("preemption", "requeue" if self.env.requeue else "relocate")
        return super()._native()


class DallyRelocateInScheduler(DallyInScheduler):
    """``dally-relocate``: Dally with ``preemption="relocate"`` (our extension, the policy
    before issue 16): a suffering job is preempted and restarted on its tightest tier at
    the same instant, a move with ``move_as="restart"``."""

    env_kwargs: ClassVar[dict[str, Any]] = {
        "order": "nw_sens",
        "preemption": True,
        "move_as": "restart",
        "running_order": "wide",
        **WINDOWS,
    }


class TiresiasInScheduler(NativeInScheduler):
    """``tiresias``: 2D-LAS queues, preemption of lower queues, skew consolidation."""

    native = "tiresias"
    env_kwargs: ClassVar[dict[str, Any]] = {
        "order": "las", "preemption": True, "running_order": "recent", **WINDOWS}  # fmt: skip
    preemption_param = "preemption"


class GandivaInScheduler(NativeInScheduler):
    """``gandiva``: greedy first fit, migration to consolidated GPUs."""

    native = "gandiva"
    env_kwargs: ClassVar[dict[str, Any]] = {
        "order": "arrival",
        "preemption": True,
        "move_as": "migrate",
        "running_order": "wide",
        **WINDOWS,
    }
    preemption_param = "migration"


class SRWInScheduler(NativeInScheduler):
    """``srw``: the clairvoyant shortest-remaining-work reference."""

    native = "srw"
    env_kwargs: ClassVar[dict[str, Any]] = {"order": "srw", "known_durations": True, **WINDOWS}


class RandomScheduler:
    """Uniform over the valid actions of the current decision point (``action_masks``)."""

    env_kwargs: ClassVar[dict[str, Any]] = {}

    def __init__(self, env: gym.Env, seed: int = 0) -> None:
        self.env = env.unwrapped
        self.rng = np.random.default_rng(seed)

    def predict(
        self,
        observation: Any,
        state: Any = None,
        episode_start: np.ndarray | None = None,
        deterministic: bool = True,
    ) -> tuple[np.ndarray, Any]:
        valid = np.flatnonzero(self.env.action_masks())
        return np.asarray(int(valid[self.rng.integers(valid.size)])), state


class ClairvoyantSlots:
    """A teacher for learned Scheduler-v0 agents (not a paper's policy): ``srw`` restricted
    to what the env shows. Among the waiting slots whose best possible tier is a valid
    candidate now (one machine if the job fits on one, else one rack, else packed), start the
    job with the least TRUE remaining GPU-work (read from the engine, so it is clairvoyant
    whatever ``known_durations`` says); stop when there is none. It acts in any
    Scheduler-v0 configuration (its choices are always in a slot)."""

    env_kwargs: ClassVar[dict[str, Any]] = {}

    def __init__(self, env: gym.Env, seed: int = 0) -> None:
        self.env = env.unwrapped

    def act(self) -> int:
        env = self.env
        slots = env._slots_w
        if slots.size == 0:
            return 0
        o, e = env.obs_state, env.engine
        best = o.best[slots].astype(np.int64)  # Tier: 0 machine, 1 rack, 2 network
        cand = env._cand[np.arange(slots.size), best]  # candidates 1..3 are the tiers
        if not cand.any():
            return 0
        left = (o.iters[slots] - e.done_iters[slots]) * o.compute[slots] * o.demand[slots]
        left = np.where(cand, left, np.inf)
        k = int(np.argmin(left))
        return 1 + k * 6 + int(best[k])

    def predict(
        self,
        observation: Any,
        state: Any = None,
        episode_start: np.ndarray | None = None,
        deterministic: bool = True,
    ) -> tuple[np.ndarray, Any]:
        return np.asarray(self.act()), state

"""Env policies as native schedulers: an agent (or any env policy) in a plain engine run.

``OfferPolicyScheduler`` answers the base policy's resource offers with a Placement
policy; ``TimerPolicyScheduler`` is Dally whose delay timers a DelayTimer policy sets at
each decision point; ``QueuePolicyScheduler`` takes every decision with a Scheduler
policy (``EnvPolicyScheduler``: a named Scheduler-env policy, e.g. the native ``las-slots``).
All build exactly the observations the env would, so a policy trained
in the env behaves the same in ``dlcluster simulate`` and in leaderboards, and the results
equal an env rollout with the same seed (including the env's ``StallGuard``: when declined
offers leave the cluster idle with nothing scheduled, the base policy is called again an hour
later, up to 24 times in a row). Each declares ``clairvoyant`` from the env it builds (its
observation's oracle features, its base policy), without loading the env policy, so that
``policy_kind("agent:PATH")`` labels a checkpoint from its metadata.
"""

from __future__ import annotations

import math
import warnings
from collections.abc import Callable, Mapping, Sequence
from typing import Any, ClassVar

import gymnasium as gym
import numpy as np

from dlcluster_gym.envs.base import StallGuard
from dlcluster_gym.scheduler import BaseScheduler, _import, is_clairvoyant, make_policy
from dlcluster_gym.sim.actions import Action
from dlcluster_gym.sim.boundary import check_workload
from dlcluster_gym.sim.offers import WAIT, Offer, drive
from dlcluster_gym.sim.view import ClusterView

PolicyFactory = Callable[[gym.Env], Any]  # env -> object with predict()


def _quiet_env(cls: type, *args: Any, **kwargs: Any) -> gym.Env:
    """An env made only to hand its spaces to the policy factory: an old version's
    ``DeprecationWarning`` is for whoever makes the env, not for every native run of a
    checkpoint trained on it (the wrapper's ``clairvoyant`` labels such a run)."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)
        return cls(*args, **kwargs)


def _start_base(base: Any, view: ClusterView, rng: np.random.Generator) -> ClusterView:
    """Reset the native ``base`` policy a wrapper drives, on the view it may read (the oracle
    open only if it declares itself clairvoyant), after its admission check; that view."""
    own = view.for_policy(base)
    check_workload(base, own)
    base.reset(own, rng)
    return own


def _action(policy: Any, obs: np.ndarray, mask: np.ndarray | None = None) -> Any:
    if mask is not None and getattr(policy, "uses_masks", False):
        a, _ = policy.predict(obs, deterministic=True, action_masks=mask)
    else:
        a, _ = policy.predict(obs, deterministic=True)
    return a


class OfferPolicyScheduler(BaseScheduler):
    """The base policy's job order, preemption and migration; each offer decided by an
    env policy on its Placement observation (a masked choice counts as wait, or, when
    ``wait_limit="rack_timer"`` masks wait as Placement-v1 does, as the most consolidated
    valid candidate). ``known_durations`` and ``done_jobs_of`` are the observation's (see
    ``PlacementEnv``); ``clairvoyant`` is the env's (``PlacementEnv.clairvoyant``), or True
    when ``clairvoyant_policy`` says the env policy itself reads ground truth."""

    name = "placement-policy"

    def __init__(
        self,
        factory: PolicyFactory,
        *,
        base_policy: str = "dally",
        base_params: Mapping[str, Any] | None = None,
        name: str | None = None,
        retry_s: float = 3600.0,
        wait_limit: str = "none",
        done_jobs_of: str = "arrived",
        known_durations: bool = False,
        clairvoyant_policy: bool = False,
    ) -> None:
        super().__init__(base_policy=base_policy, base_params=dict(base_params or {}))
        self.retry_s = float(retry_s)
        self.done_jobs_of = done_jobs_of
        self.known_durations = bool(known_durations)
        self.wait_limit = wait_limit  # "none": Placement-v0; "rack_timer": Placement-v1
        self.factory = factory
        self.base_policy = base_policy
        self.base_params = dict(base_params or {})
        self._clairvoyant = (
            self.known_durations
            or done_jobs_of == "workload"
            or bool(clairvoyant_policy)
            or is_clairvoyant(make_policy(base_policy, **self.base_params))
        )
        if name:
            self.name = name

    @property
    def clairvoyant(self) -> bool:
        """Whether the run reads ground truth (see the class docstring)."""
        return self._clairvoyant

    def reset(self, view: ClusterView, rng: np.random.Generator) -> None:
        from dlcluster_gym.envs.placement import PlacementEnv, PlacementObserver

        super().reset(view, rng)
        self.base = make_policy(self.base_policy, **self.base_params)
        self._base_view = _start_base(self.base, view, rng)
        self._guard = StallGuard(self.retry_s)
        self.observer = PlacementObserver(view, self.done_jobs_of, self.known_durations)
        env = _quiet_env(
            PlacementEnv,
            view.scenario,
            base_policy=self.base_policy,
            base_params=self.base_params,
            wait_retry_s=self.retry_s,
            wait_limit=self.wait_limit,
            done_jobs_of=self.done_jobs_of,
            known_durations=self.known_durations,
        )
        self.policy = self.factory(env)

    def choose(self, offer: Offer) -> int:
        mask = offer.mask
        if self.wait_limit == "rack_timer" and offer.past_rack_timer and offer.past_machine_timer:
            mask = mask.copy()
            mask[WAIT] = not mask[1:].any()
        a = int(np.asarray(_action(self.policy, self.observer.observe(offer), mask)))
        if 0 <= a < mask.size and mask[a]:
            return a
        return WAIT if mask[WAIT] else int(np.flatnonzero(mask)[0])

    def schedule(self, view: ClusterView) -> Sequence[Action]:
        return self._guard(view, drive(self.base.offers(self._base_view), self.choose))


class TimerPolicyScheduler(BaseScheduler):
    """Dally with the delay timers an env policy sets on its DelayTimer observation at the
    first scheduling instant at or after every ``decision_period_s``. ``clairvoyant`` is the
    env's (``DelayTimerEnv.clairvoyant``), or True with ``clairvoyant_policy``."""

    name = "delay-timer-policy"

    def __init__(
        self,
        factory: PolicyFactory,
        *,
        decision_period_s: float = 3600.0,
        max_timer_s: float = 48 * 3600.0,
        dally_params: Mapping[str, Any] | None = None,
        name: str | None = None,
        retry_s: float = 3600.0,
        done_jobs_of: str = "arrived",
        clairvoyant_policy: bool = False,
    ) -> None:
        super().__init__(decision_period_s=decision_period_s, max_timer_s=max_timer_s)
        self.retry_s = float(retry_s)
        self.done_jobs_of = done_jobs_of
        self.factory = factory
        self.decision_period_s = float(decision_period_s)
        self.max_timer_s = float(max_timer_s)
        self.dally_params = dict(dally_params or {})
        self._clairvoyant = (
            done_jobs_of == "workload"
            or bool(clairvoyant_policy)
            or is_clairvoyant(make_policy("dally", **self.dally_params))
        )
        if name:
            self.name = name

    @property
    def clairvoyant(self) -> bool:
        """Whether the run reads ground truth (see the class docstring)."""
        return self._clairvoyant

    def reset(self, view: ClusterView, rng: np.random.Generator) -> None:
        from dlcluster_gym.envs.delay_timer import NUM_CLASSES, DelayTimerEnv, TimerObserver

        super().reset(view, rng)
        self.base = make_policy("dally", **self.dally_params)
        self._base_view = _start_base(self.base, view, rng)
        self.base.timer_override = self._timer_for
        self._guard = StallGuard(self.retry_s)
        self.observer = TimerObserver(view, self.base, self.max_timer_s, self.done_jobs_of)
        env = _quiet_env(
            DelayTimerEnv,
            view.scenario,
            decision_period_s=self.decision_period_s,
            max_timer_s=self.max_timer_s,
            dally_params=self.dally_params,
            wait_retry_s=self.retry_s,
            done_jobs_of=self.done_jobs_of,
        )
        self.policy = self.factory(env)
        self._timers = np.zeros((NUM_CLASSES, 2))
        self._next = 0.0

    def _timer_for(self, demand: int) -> tuple[float, float]:
        from dlcluster_gym.envs.delay_timer import demand_class

        tm, extra = self._timers[demand_class(demand)]
        return float(tm), float(tm + extra)

    def schedule(self, view: ClusterView) -> Sequence[Action]:
        from dlcluster_gym.envs.delay_timer import action_to_timers

        if view.now >= self._next:
            a = _action(self.policy, self.observer.observe(self._timers))
            self._timers = action_to_timers(a, self.max_timer_s, self.name)
            p = self.decision_period_s
            self._next = (math.floor(view.now / p) + 1.0) * p
        return self._guard(view, self.base.schedule(self._base_view))


class QueuePolicyScheduler(BaseScheduler):
    """Every decision of the run taken by a Scheduler policy on its observation, one
    decision at a time, exactly as in the env (the same slots, masks and observation code:
    ``SchedulerEnv`` attached to this run). A masked choice counts as "no more starts now".
    ``clairvoyant`` is the env's (``SchedulerEnv.clairvoyant``, from ``env_kwargs``), or True
    with ``clairvoyant_policy`` (an env policy that reads ground truth itself, e.g. the
    ``srw-slots`` teacher)."""

    name = "scheduler-policy"

    def __init__(
        self,
        factory: PolicyFactory,
        *,
        env_kwargs: Mapping[str, Any] | None = None,
        name: str | None = None,
        clairvoyant_policy: bool = False,
    ) -> None:
        super().__init__(env_kwargs=dict(env_kwargs or {}))
        self.factory = factory
        self.env_kwargs = dict(env_kwargs or {})
        kw = self.env_kwargs
        self._clairvoyant = (
            bool(kw.get("known_durations", False))
            or kw.get("order") == "srw"
            or kw.get("done_jobs_of") == "workload"
            or bool(clairvoyant_policy)
        )
        if name:
            self.name = name

    @property
    def clairvoyant(self) -> bool:
        """Whether the run reads ground truth (see the class docstring)."""
        return self._clairvoyant

    def reset(self, view: ClusterView, rng: np.random.Generator) -> None:
        from dlcluster_gym.envs.scheduler_env import SchedulerEnv

        super().reset(view, rng)
        self.env = _quiet_env(SchedulerEnv, view.scenario, **self.env_kwargs)
        self.env.attach(view)
        self.policy = self.factory(self.env)
        self.env.policy_stops_at_moves = bool(getattr(self.policy, "stops_at_moves", False))
        self._guard = StallGuard(self.env.wait_retry_s)

    def schedule(self, view: ClusterView) -> Sequence[Action]:
        env = self.env
        gen = env._decide(view)
        observe = getattr(self.policy, "reads_observation", True)
        try:
            next(gen)
            while True:
                mask = env.action_masks() if getattr(self.policy, "uses_masks", False) else None
                raw = _action(self.policy, env._observe() if observe else None, mask)
                gen.send(env.valid_or_default(raw))  # a masked choice: stop, defer or keep
        except StopIteration as stop:
            actions = stop.value
        return self._guard(view, actions)


class EnvPolicyScheduler(QueuePolicyScheduler):
    """A Scheduler-env policy (an entry of ``envs.policies.ENV_POLICIES["Scheduler"]``) as a
    native policy: every decision taken by it, in a ``SchedulerEnv`` made as
    ``Scheduler-v{env_version}`` with the policy class's ``env_kwargs`` (the env arguments it
    needs, e.g. preemption), so a native run equals an env rollout of the policy in that env
    with the same seed. Subclasses name the policy (``env_policy``), its class (``target``,
    ``"module:Class"``, imported when the scheduler is made) and the env version its actions
    are written for (``env_version``), and declare the policy's parameters in their
    constructor (the registry checks them by name and type); ``params`` go to the policy
    class. ``clairvoyant`` is the class's declaration or its env kwargs'
    (``QueuePolicyScheduler``)."""

    env_policy: ClassVar[str] = ""
    target: ClassVar[str] = ""
    env_version: ClassVar[int] = 2

    def __init__(self, **params: Any) -> None:
        from dlcluster_gym.envs.agent_meta import version_kwargs

        cls = _import(self.target)
        check = getattr(cls, "check_params", None)
        if check is not None:  # the values, now rather than at the first decision
            check(**params)
        env_kwargs = {**version_kwargs("Scheduler", self.env_version), **cls.env_kwargs}
        super().__init__(
            self._make,
            env_kwargs=env_kwargs,
            name=self.env_policy,
            clairvoyant_policy=getattr(cls, "clairvoyant", False) is True,
        )
        self.policy_params = dict(params)
        self.params = dict(params)

    def _make(self, env: gym.Env) -> Any:
        return _import(self.target)(env, **self.policy_params)


class LASSlotsScheduler(EnvPolicyScheduler):
    """``las-slots`` as a native policy: least attained GPU-service first over the waiting
    and running jobs, preempting a running job that a waiting one outranks by ``margin``
    GPU-hours (``baselines.queue_policies.LASSlots``; deployable: it reads attained service,
    never lengths), acting on Scheduler-v2's slot actions with its env kwargs
    (``preemption``, ``order="las"``, ``running_order="attained"``). Parameters: those of
    ``LASSlots`` with its defaults (the margin and the starvation guards, all off by
    default; ``IndexSlots`` documents them)."""

    name = "las-slots"
    env_policy = "las-slots"
    target = "dlcluster_gym.baselines.queue_policies:LASSlots"
    env_version = 2

    def __init__(
        self,
        margin: float = 4.0,
        fallback: bool = False,
        promote_knob: float = 0.0,
        max_wait_h: float = math.inf,
        wait_ratio: float = 0.0,
        protected_preempts: bool = True,
        max_preemptions: int | None = None,
        wait_from: str = "arrival",
    ) -> None:
        super().__init__(
            margin=margin, fallback=fallback, promote_knob=promote_knob, max_wait_h=max_wait_h,
            wait_ratio=wait_ratio, protected_preempts=protected_preempts,
            max_preemptions=max_preemptions, wait_from=wait_from,
        )  # fmt: skip


class _RuleSlotsScheduler(EnvPolicyScheduler):
    """An ``IndexSlots`` rule as a native policy in las-slots's env (Scheduler-v2 slot actions,
    preemption, ``order="las"``, ``running_order="attained"``). Parameters: ``margin``
    (GPU-hours, 4.0) and ``fallback`` (False), as ``las-slots``."""

    env_version = 2

    def __init__(self, margin: float = 4.0, fallback: bool = False) -> None:
        super().__init__(margin=margin, fallback=fallback)


class QSSFSlotsScheduler(_RuleSlotsScheduler):
    """``qssf-preemptive``: ``baselines.queue_policies.QSSFSlots`` as a native policy (least
    estimated remaining GPU-service first, preempting; deployable)."""

    name = "qssf-preemptive"
    env_policy = "qssf-slots"
    target = "dlcluster_gym.baselines.queue_policies:QSSFSlots"


class GittinsSlotsScheduler(EnvPolicyScheduler):
    """``gittins-slots``: ``baselines.queue_policies.GittinsSlots`` as a native policy (the
    Gittins index of attained run time under Dally's duration distribution, per GPU,
    preempting; deployable). Parameters: ``margin`` (an index ratio, 0.25) and
    ``fallback`` (False)."""

    name = "gittins-slots"
    env_policy = "gittins-slots"
    target = "dlcluster_gym.baselines.queue_policies:GittinsSlots"
    env_version = 2

    def __init__(self, margin: float = 0.25, fallback: bool = False) -> None:
        super().__init__(margin=margin, fallback=fallback)


class SRSFSlotsScheduler(_RuleSlotsScheduler):
    """``srsf``: ``baselines.queue_policies.SRSFSlots`` as a native policy (least TRUE
    remaining GPU-service first, preempting; clairvoyant)."""

    name = "srsf"
    env_policy = "srsf-slots"
    target = "dlcluster_gym.baselines.queue_policies:SRSFSlots"

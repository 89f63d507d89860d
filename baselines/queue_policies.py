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

import math
from typing import Any, ClassVar

import gymnasium as gym
import numpy as np

from dlcluster_gym import numerics
from dlcluster_gym.errors import ConfigError
from dlcluster_gym.scheduler import check_policy_params, is_clairvoyant, make_policy
from dlcluster_gym.sim.actions import Migrate, Preempt, Start, WakeUp
from dlcluster_gym.sim.boundary import check_workload
from dlcluster_gym.sim.estimators import keyed_remaining_work
from dlcluster_gym.sim.offers import PACKED

RULES: tuple[str, ...] = ("gittins", "las", "qssf", "srsf")
"""``IndexSlots``'s priority rules (``srsf`` is clairvoyant)."""
_PROTECTED = 1e9  # index offset of the jobs protected by ``IndexSlots``'s starvation guards
WINDOWS: dict[str, Any] = {"max_waiting": 64, "max_running": 64, "skip_trivial": False}


class _EnvActing:
    """SB3-style ``predict`` for the policies of this module, which pick an action from the
    env's state (``act``) and ignore the observation (``reads_observation``: a native run
    does not build it for them)."""

    reads_observation: ClassVar[bool] = False

    def act(self) -> int:
        raise NotImplementedError

    def predict(
        self,
        observation: Any,
        state: Any = None,
        episode_start: np.ndarray | None = None,
        deterministic: bool = True,
    ) -> tuple[np.ndarray, Any]:
        return np.asarray(self.act()), state


class NativeInScheduler(_EnvActing):
    """A native scheduler acting through Scheduler-v0's actions (see the module docstring)."""

    native = "fcfs"
    env_kwargs: ClassVar[dict[str, Any]] = {"order": "arrival", **WINDOWS}
    preemption_param: str | None = None  # the native parameter that turns preemption off

    def __init__(self, env: gym.Env, **params: Any) -> None:
        self.env = env.unwrapped
        self.action_space = env.action_space
        self.observation_space = env.observation_space
        self.params = check_policy_params(self.native, dict(params))  # fail at construction
        self.clairvoyant = is_clairvoyant(self._native())  # the native policy's declaration
        self._engine: Any = None
        self._instant = -1
        self._queue: list[tuple[str, int, Any, Any]] = []
        self._view: Any = None

    def _native(self) -> Any:
        params = dict(self.params)
        if self.preemption_param and not self.env.preemption:
            params.setdefault(self.preemption_param, False)
        return make_policy(self.native, **params)

    def act(self) -> int:
        env = self.env
        if env.engine is not self._engine:  # a new episode
            self._engine = env.engine
            self.policy = self._native()
            # the view the native policy may read (the oracle open only if it declares itself
            # clairvoyant), after its admission check, as the engine does natively
            self._view = env.view.for_policy(self.policy)
            check_workload(self.policy, self._view)
            self.policy.reset(self._view, env.engine.rng)
            self._instant = -1
        if env.instant_index != self._instant:  # a new decision instant
            self._instant = env.instant_index
            self._queue, wakeups = self._translate(self.policy.schedule(self._view))
            for t in wakeups:  # sent with this instant's decisions, however it ends
                env.wake_up(t)
        return self._next()

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
        if not env.allowed(a):
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
    """``dally-relocate``: Dally with ``preemption="relocate"`` (our extension, the earlier
    default): a suffering job is preempted and restarted on its tightest tier at
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
    # Tiresias orders a queue by arrival, the env's window by attained service: with many
    # jobs at the same attained service (a batch arrival) the job Tiresias starts can lie
    # beyond a 64-slot window, so its waiting window is wider.
    env_kwargs: ClassVar[dict[str, Any]] = {"order": "las", "preemption": True,
                                            "running_order": "recent", **WINDOWS,
                                            "max_waiting": 1024}  # fmt: skip
    preemption_param = "preemption"


class GandivaInScheduler(NativeInScheduler):
    """``gandiva`` in the Scheduler env: greedy first fit, migration to consolidated GPUs (the
    ``gandiva-placement`` variant: the env's slots give each job its own GPUs, so Gandiva's
    time-slicing of a shared GPU set has no expression here)."""

    native = "gandiva-placement"
    env_kwargs: ClassVar[dict[str, Any]] = {
        "order": "arrival",
        "preemption": True,
        "move_as": "migrate",
        "running_order": "wide",
        **WINDOWS,
    }
    preemption_param = "migration"


class SRWInScheduler(NativeInScheduler):
    """``srw``: the clairvoyant shortest-remaining-work reference (``clairvoyant``, from
    ``srw``'s declaration; its env order ``srw`` needs ``known_durations=True``)."""

    native = "srw"
    env_kwargs: ClassVar[dict[str, Any]] = {"order": "srw", "known_durations": True, **WINDOWS}


class RandomScheduler(_EnvActing):
    """Uniform over the valid actions of the current decision point (``action_masks``)."""

    env_kwargs: ClassVar[dict[str, Any]] = {}

    def __init__(self, env: gym.Env, seed: int = 0) -> None:
        self.env = env.unwrapped
        self.rng = np.random.default_rng(seed)

    def act(self) -> int:
        valid = np.flatnonzero(self.env.action_masks())
        return int(valid[self.rng.integers(valid.size)])


class ClairvoyantSlots(_EnvActing):
    """A teacher for learned Scheduler agents (not a paper's policy): ``srw`` restricted
    to what the env shows. Among the waiting slots whose best possible tier is a valid
    candidate now (one machine if the job fits on one, else one rack, else packed), start the
    job with the least TRUE remaining GPU-work (through the oracle of the env's view: it is
    clairvoyant, ``clairvoyant = True``, whatever ``known_durations`` says); stop when there
    is none. It acts in any Scheduler configuration (its choices are always in a slot)."""

    env_kwargs: ClassVar[dict[str, Any]] = {}
    clairvoyant = True

    def __init__(self, env: gym.Env, seed: int = 0) -> None:
        self.env = env.unwrapped

    def act(self) -> int:
        env = self.env
        slots = env._slots_w
        if slots.size == 0:
            return 0
        o = env.obs_state
        best = o.best[slots].astype(np.int64)  # Tier: 0 machine, 1 rack, 2 network
        cand = env._cand[np.arange(slots.size), best]  # candidates 1..3 are the tiers
        if not cand.any():
            return 0
        # waiting jobs' counters are current: the oracle's remaining iterations as of now
        rem = env.view.for_policy(self).oracle.remaining_iterations(slots)
        left = rem * o.compute[slots] * o.demand[slots]
        left = np.where(cand, left, np.inf)
        k = int(np.argmin(left))
        return 1 + k * 6 + int(best[k])


def gittins_table(
    quantiles_s: tuple[float, ...] | None = None, levels: tuple[float, ...] | None = None
) -> tuple[np.ndarray, np.ndarray]:
    """(ages in seconds, Gittins index per second of run time) of a duration distribution given
    by quantiles (default: the fitted Dally job mix of ``workload.generators``; the CDF is
    linear in log(duration) between quantiles, as the generator samples it).

    The index of a job that has run ``a`` seconds is
    ``max_{b > a} (F(b) - F(a)) / integral_a^b (1 - F(t)) dt``: the best rate of completion
    per second of service it can promise (Gittins; for one server, the non-clairvoyant policy
    that minimises mean response time). Past the largest quantile it is infinite."""
    from dlcluster_gym.workload.generators import (
        DALLY_DURATION_LEVELS,
        DALLY_DURATION_QUANTILES_S,
    )

    q = np.asarray(quantiles_s or DALLY_DURATION_QUANTILES_S, dtype=np.float64)
    lv = np.asarray(levels or DALLY_DURATION_LEVELS, dtype=np.float64)
    t = np.concatenate(([0.0], numerics.geomspace(q[0] / 4, q[-1], 600)))
    cdf = np.interp(numerics.log(np.maximum(t, 1e-9)), numerics.log(q), lv, left=0.0, right=1.0)
    surv = 1.0 - cdf
    cum = np.concatenate(([0.0], np.cumsum(0.5 * (surv[1:] + surv[:-1]) * np.diff(t))))
    g = np.full(t.size, np.inf)
    for i in range(t.size - 1):
        work = cum[i + 1 :] - cum[i]
        gain = cdf[i + 1 :] - cdf[i]
        ok = work > 0
        if ok.any() and surv[i] > 0:
            g[i] = float(np.max(gain[ok] / work[ok]))
    return t, g


class IndexSlots(_EnvActing):
    """A non-clairvoyant teacher for learned Scheduler-v0 agents that uses the preempt action
    (not a paper's policy; env ``preemption=True``, ``order="las"``,
    ``running_order="attained"``, its ``env_kwargs``).

    Each job has a priority index from what a real scheduler sees: ``rule="gittins"``
    (default) the Gittins index of its run time so far under the workload's duration
    distribution (``gittins_table``), divided by its GPUs (durations in Dally's generator
    do not depend on the demand, so expected GPU-work grows with it); ``rule="las"`` minus
    its attained GPU-service (Tiresias's 2D-LAS without queue discretization, 3.4 of Dally;
    ties: fewer GPUs first); ``rule="qssf"`` minus its estimated remaining GPU-service (the
    ``keyed`` estimate of ``sim.estimators`` from the finished jobs that share its user and
    job name, or its VC and GPU count, x its GPUs; minus its attained GPU-service, as ``las``,
    where no finished job of its keys is longer than its work done); ``rule="srsf"`` minus its
    TRUE remaining GPU-service (clairvoyant: only ``SRSFSlots`` uses it, and declares it).
    At each step: (1) the target set is the jobs (waiting and
    running) taken greedily by decreasing index while their GPUs fit in the cluster;
    (2) if a waiting job of the target set outranks a running job outside it by more than
    ``margin`` (index ratio for ``gittins``; GPU-hours for ``las``, ``qssf``, ``srsf``) and that
    job is
    in a running slot, preempt the lowest such job (checkpointed, it keeps its progress);
    (3) else start the waiting slot job of highest index on its best possible tier (one
    machine if it fits on one, else one rack, else packed), or, with ``fallback=True``, a job
    of the target set on the packed candidate when its best tier is not free (off by default:
    on validation it left a 32-GPU job spread over the network for 880 h); (4) else stop. Decisions
    happen at the env's instants (arrivals and finishes), so a job is only preempted when
    something else changed; the margin keeps it from cycling.

    Starvation guards (``rule="las"`` only; all off by default, so ``las-slots`` is unchanged;
    measured on validation in ``experiments/results/agents/teachers_guards.md``):

    * ``promote_knob`` > 0: Tiresias's starvation guard (Tiresias NSDI'19 PROMOTEKNOB, as in
      ``baselines/tiresias.py``; LAS in 3.4 of Dally): a waiting job that has run since its
      last promotion and has waited, since it last entered the wait queue, at least
      ``promote_knob`` x that run time is promoted: its attained service counts from zero
      again. Our choices where the paper is silent for this policy: checked at every step;
      run time is wall time holding GPUs (the engine's ``run_s``), as in our Tiresias.
    * ``max_wait_h`` < inf (our extension): a cap on how long a job may be kept out by
      preemption. A job that has run before and has waited, in all since it arrived (age
      minus run time), at least ``max_wait_h + wait_ratio x`` its run time in hours is
      protected: waiting, it ranks above every unprotected job (the longest total wait first)
      and, if ``protected_preempts``, may preempt to enter; running, it is never preempted for
      an unprotected job (for a protected one only if that one waited ``margin`` hours more).
      ``wait_from="first_start"`` counts only the time kept out after the job first started.
    * ``max_preemptions`` (our extension): a running job preempted that many times already is
      never preempted again."""

    env_kwargs: ClassVar[dict[str, Any]] = {
        "preemption": True, "order": "las", "running_order": "attained"}  # fmt: skip
    stops_at_moves: ClassVar[bool] = True
    """Where only STOP and moves are valid, no job waits, and ``act`` answers STOP at once (a
    native run need not offer such a point: ``SchedulerEnv.policy_stops_at_moves``)."""
    cache_index: ClassVar[bool] = True
    """Compute the jobs' indexes once per decision instant (``_instant_index``; off: at every
    step; the decisions are the same, tested)."""
    _tables: ClassVar[dict[str, tuple[np.ndarray, np.ndarray]]] = {}

    @staticmethod
    def check_params(
        rule: str = "gittins",
        margin: float = 1.0,
        promote_knob: float = 0.0,
        max_wait_h: float = math.inf,
        wait_ratio: float = 0.0,
        max_preemptions: int | None = None,
        wait_from: str = "arrival",
        **_: Any,
    ) -> None:
        """The parameters' values (their types are checked by the registry): a clear
        ``ConfigError`` naming the parameter, when the policy is made rather than at the first
        decision (``envs.native.EnvPolicyScheduler`` calls this)."""
        if rule not in RULES:
            raise ConfigError(f"index-slots: rule must be one of {', '.join(RULES)}, got {rule!r}")
        for key, v, lo in (("promote_knob", promote_knob, 0.0), ("wait_ratio", wait_ratio, 0.0),
                           ("max_wait_h", max_wait_h, 0.0), ("margin", margin, 0.0)):  # fmt: skip
            if isinstance(v, bool) or not isinstance(v, int | float) or not v >= lo:
                raise ConfigError(f"index-slots: {key} must be a number >= {lo:g}, got {v!r}")
        if not math.isfinite(promote_knob) or not math.isfinite(wait_ratio):
            raise ConfigError(
                "index-slots: promote_knob and wait_ratio must be finite, got "
                f"promote_knob={promote_knob!r}, wait_ratio={wait_ratio!r}"
            )
        if not math.isfinite(margin):
            raise ConfigError(f"index-slots: margin must be finite, got {margin!r}")
        if max_preemptions is not None and (
            isinstance(max_preemptions, bool) or not isinstance(max_preemptions, int)
            or max_preemptions < 1
        ):  # fmt: skip
            raise ConfigError(f"index-slots: max_preemptions must be an integer >= 1 or None, "
                              f"got {max_preemptions!r}")  # fmt: skip
        if wait_from not in ("arrival", "first_start"):
            raise ConfigError(f"index-slots: wait_from must be 'arrival' or 'first_start', "
                              f"got {wait_from!r}")  # fmt: skip
        guarded = promote_knob > 0 or math.isfinite(max_wait_h) or max_preemptions is not None
        if guarded and rule != "las":
            raise ConfigError("index-slots: the starvation guards need rule='las'")

    def __init__(
        self,
        env: gym.Env,
        rule: str = "gittins",
        margin: float = 1.0,
        fallback: bool = False,
        promote_knob: float = 0.0,
        max_wait_h: float = math.inf,
        wait_ratio: float = 0.0,
        protected_preempts: bool = True,
        max_preemptions: int | None = None,
        wait_from: str = "arrival",
    ) -> None:
        self.check_params(
            rule=rule, margin=margin, promote_knob=promote_knob, max_wait_h=max_wait_h,
            wait_ratio=wait_ratio, max_preemptions=max_preemptions, wait_from=wait_from,
        )  # fmt: skip
        self.env = env.unwrapped
        if not getattr(self.env, "preemption", False):
            teacher = "las-slots" if rule == "las" else "gittins-slots"
            raise ConfigError(
                f"{teacher} preempts: make the env with preemption=True (its env_kwargs: "
                f"{self.env_kwargs}); this {self.env.env_name} env has preemption=False"
            )
        self.rule = rule
        self.margin = float(margin)
        self.fallback = bool(fallback)
        self.promote_knob = float(promote_knob)
        self.max_wait_h = float(max_wait_h)
        self.wait_ratio = float(wait_ratio)
        self.protected_preempts = bool(protected_preempts)
        self.max_preemptions = max_preemptions
        self.wait_from = wait_from
        self.promotions = 0
        self._engine: Any = None
        self._att_base = np.zeros(0)
        self._run_base = np.zeros(0)
        self._at: tuple[Any, int] = (None, -1)  # the (engine, instant) of ``_by_job``
        self._by_job = np.zeros(0)
        if rule == "gittins" and "dally" not in self._tables:
            self._tables["dally"] = gittins_table()

    def _index(self, jobs: np.ndarray) -> np.ndarray:
        env = self.env
        done, run, att = env.view.live(jobs)
        g = env.obs_state.demand[jobs].astype(np.float64)
        if self.rule in ("qssf", "srsf"):
            compute = env.obs_state.compute[jobs]
            if self.rule == "srsf":
                left = env.view.for_policy(self).oracle.remaining_iterations(jobs) * compute
            else:
                est, _ = keyed_remaining_work(env.view.history, jobs, done * compute)
                left = np.where(np.isnan(est), att / np.maximum(g, 1.0), est)
            return -(np.maximum(left, 0.0) * g / 3600.0) - 1e-6 * g
        if self.rule == "las":
            if self.promote_knob > 0:
                att = att - self._promote(jobs, run, att)
            idx = -(att / 3600.0) - 1e-6 * g
            if math.isfinite(self.max_wait_h):
                t0 = env.obs_state.arrival[jobs]
                if self.wait_from == "first_start":  # only the time kept out after a start
                    t0 = np.where(run > 0, env.engine.first_start[jobs], t0)
                waited = (env.engine.now - t0 - run) / 3600.0
                cap = self.max_wait_h + self.wait_ratio * run / 3600.0
                protected = (run > 0) & (waited >= cap)
                idx = np.where(protected, _PROTECTED + waited, idx)
            if self.max_preemptions is not None:
                e = env.engine
                on = np.isin(jobs, np.fromiter(e.running, dtype=np.int64, count=len(e.running)))
                idx = np.where(on & (e.preemptions[jobs] >= self.max_preemptions), _PROTECTED, idx)
            return idx
        t, gi = self._tables["dally"]
        k = np.clip(np.searchsorted(t, run, side="right") - 1, 0, t.size - 1)
        return gi[k] / g

    def _instant_index(self, jobs: np.ndarray) -> np.ndarray:
        """``_index(jobs)``, computed once per decision instant for every job then waiting or
        running: within an instant the engine does not move, so a job's index does not change
        (the starvation guard promotes a job at most once per instant), and each job's index
        depends on that job alone."""
        if not self.cache_index:
            return self._index(jobs)
        env = self.env
        e = env.engine
        if self._at[0] is not e or self._at[1] != env.instant_index:
            self._at = (e, env.instant_index)
            every = np.concatenate((
                np.fromiter(e.waiting, dtype=np.int64, count=len(e.waiting)),
                np.fromiter(e.running, dtype=np.int64, count=len(e.running)),
            ))  # fmt: skip
            if self._by_job.size != e.attained.size:
                self._by_job = np.zeros(e.attained.size)  # entries of other jobs go unread
            self._by_job[every] = self._index(every)
        return self._by_job[jobs]

    def _promote(self, jobs: np.ndarray, run: np.ndarray, att: np.ndarray) -> np.ndarray:
        """Apply the starvation guard to ``jobs``; their attained service at last promotion."""
        e = self.env.engine
        if e is not self._engine or self._att_base.size < e.attained.size:  # a new episode
            self._engine = e
            self._att_base = np.zeros(e.attained.size)
            self._run_base = np.zeros(e.attained.size)
            self.promotions = 0
        waiting = np.isin(jobs, np.fromiter(e.waiting, dtype=np.int64, count=len(e.waiting)))
        executed = run - self._run_base[jobs]
        starving = waiting & (executed > 0)
        starving &= e.now - e.wait_since[jobs] >= self.promote_knob * executed
        if starving.any():
            s = jobs[starving]
            self._att_base[s] = att[starving]
            self._run_base[s] = run[starving]
            self.promotions += int(starving.sum())
        return self._att_base[jobs]

    def _outranks(self, hi: float, lo: float) -> bool:
        if self.rule == "las":
            return hi - lo > self.margin
        return hi > (1.0 + self.margin) * lo

    def act(self) -> int:
        env = self.env
        e, o = env.engine, env.obs_state
        tm = env._tmask
        waiting = np.fromiter(e.waiting, dtype=np.int64, count=len(e.waiting))
        waiting = waiting[~tm[waiting]]
        running = np.fromiter(e.running, dtype=np.int64, count=len(e.running))
        running = running[~tm[running]]
        if waiting.size == 0:
            return 0
        jobs = np.concatenate((waiting, running))
        idx = self._instant_index(jobs)
        order = np.lexsort((jobs, -idx))
        dem = o.demand[jobs[order]]
        cap, used = int(e.cluster.num_gpus), 0
        target = np.zeros(jobs.size, dtype=bool)
        for i, d in zip(order.tolist(), dem.tolist(), strict=True):
            if used + d <= cap:
                target[i] = True
                used += d
                if used == cap:  # every demand is >= 1: nothing further fits
                    break
        nw = waiting.size
        w_in = target[:nw]
        if not self.protected_preempts:  # protected waiting jobs do not preempt
            w_in = w_in & (idx[:nw] < _PROTECTED)
        if env.preemption and w_in.any() and running.size:
            best_w = float(idx[:nw][w_in].max())
            out = np.flatnonzero(~target[nw:])
            in_slot = set(env._slots_r.tolist())
            cand = [i for i in out.tolist() if running[i] in in_slot]
            cand = [i for i in cand if self._outranks(best_w, float(idx[nw + i]))]
            if cand:
                i = min(cand, key=lambda j: (float(idx[nw + j]), int(running[j])))
                a = env.encode("preempt", int(running[i]))
                if a is not None and env.allowed(a):
                    return a
        slots = env._slots_w
        if slots.size == 0:
            return 0
        pos = {int(j): k for k, j in enumerate(waiting.tolist())}
        s_idx = np.array([idx[pos[int(j)]] for j in slots.tolist()])
        s_tgt = np.array([w_in[pos[int(j)]] for j in slots.tolist()])
        best = o.best[slots].astype(np.int64)
        at_best = env._cand[np.arange(slots.size), best]
        packed = env._cand[:, PACKED - 1] & s_tgt & self.fallback
        for k in np.lexsort((slots, -s_idx)).tolist():
            if at_best[k]:
                return 1 + k * 6 + int(best[k])
            if packed[k]:
                return 1 + k * 6 + PACKED - 1
        return 0


class _RuleSlots(IndexSlots):
    """``IndexSlots`` with a fixed ``rule`` (``RULE``) and a 4 GPU-hour margin (las-slots's)."""

    RULE: ClassVar[str] = ""

    def __init__(self, env: gym.Env, margin: float = 4.0, fallback: bool = False) -> None:
        self.check_params(margin=margin)
        super().__init__(env, rule=self.RULE, margin=margin, fallback=fallback)

    @classmethod
    def check_params(cls, margin: float = 4.0, **params: Any) -> None:  # type: ignore[override]
        params.pop("rule", None)  # fixed by the class
        IndexSlots.check_params(rule=cls.RULE, margin=margin, **params)


class QSSFSlots(_RuleSlots):
    """Preemptive quasi-shortest-service-first: ``IndexSlots`` with ``rule="qssf"`` (the least
    estimated remaining GPU-service first, estimated from finished jobs of the same user and
    job name, or VC and GPU count; deployable), las-slots's placement, preemption and
    4 GPU-hour margin. With no usable history it ranks as ``las-slots``."""

    RULE = "qssf"


class GittinsSlots(_RuleSlots):
    """Gittins-index order (``IndexSlots`` with ``rule="gittins"``): the index of a job's run
    time so far under the duration distribution of Dally's generator, per GPU, las-slots's
    placement and preemption. Deployable: it reads no job's length, only the distribution
    the workload's lengths are drawn from, which an operator fits from the history of a
    workload (on one server, the Gittins index is the non-clairvoyant order that minimises
    mean response time, so it shows what knowing the distribution is worth; on other
    workloads than Dally's generator the table is misspecified). The margin is an index
    ratio, 0.25 by default: the best mean of 0.25, 1 and 3 on the validation seeds 501-502
    of ``experiments/results/agents/teachers.md``."""

    RULE = "gittins"

    def __init__(self, env: gym.Env, margin: float = 0.25, fallback: bool = False) -> None:
        super().__init__(env, margin=margin, fallback=fallback)

    @classmethod
    def check_params(cls, margin: float = 0.25, **params: Any) -> None:  # type: ignore[override]
        super().check_params(margin=margin, **params)


class SRSFSlots(_RuleSlots):
    """CLAIRVOYANT shortest remaining GPU-service first: ``IndexSlots`` with ``rule="srsf"``
    (true remaining iterations x compute x GPUs, from the oracle), las-slots's placement,
    preemption and 4 GPU-hour margin. A reference for the room above deployable policies."""

    RULE = "srsf"
    clairvoyant = True


class LASSlots(IndexSlots):
    """``IndexSlots`` with ``rule="las"`` (least attained GPU-service first) and a margin of
    4 GPU-hours, the best of 0.25, 1, 4, 16 and 64 on validation seeds 501-502 of
    ``dally-batch-4rack`` (200 jobs) in Scheduler-v0 (``experiments/results/agents/
    teachers.md``)."""

    def __init__(
        self,
        env: gym.Env,
        rule: str = "las",
        margin: float = 4.0,
        fallback: bool = False,
        **guards: Any,
    ) -> None:
        given = {"rule": rule, "margin": margin, "fallback": fallback, **guards}
        name = "las-slots (takes gittins-slots' parameters; its defaults: rule 'las', margin 4.0)"
        p = check_policy_params(name, given, IndexSlots, bound=("env",))
        super().__init__(env, **p)

    @staticmethod
    def check_params(rule: str = "las", margin: float = 4.0, **params: Any) -> None:
        IndexSlots.check_params(rule=rule, margin=margin, **params)

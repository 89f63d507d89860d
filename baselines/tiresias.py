"""Tiresias: Discretized 2D-LAS with preemption, starvation promotion and skew-based placement.

As Dally describes it (3.2, 3.4) and the NSDI'19 paper defines it (Gu et al., "Tiresias: A GPU
Cluster Manager for Distributed Deep Learning", sections 3.1-3.3 and 5.5; the paper is not in
../shared/papers, so its sections are cited from published summaries of it, and its values from
the authors' public simulator, SymbioticLab/Tiresias ``simulator/``):

- **Priority** (2D-LAS; Tiresias 3.2.2-3.2.3, Dally 3.4): a job's attained service is GPUs x
  time run. It is discretized into K priority queues (an MLFQ) by thresholds on attained
  service; a new job enters the highest queue and is demoted when its attained service
  crosses the next threshold. A job's queue only goes down (MLFQ demotion) until a starvation
  promotion puts it back at the top, so without promotion a job is demoted at most K - 1
  times. Within a queue, running jobs keep their GPUs and waiting jobs are served in arrival
  order (FIFO), so jobs of one queue never preempt each other: the discretization exists to
  avoid the preemption cascades of continuous priorities (Tiresias 3.2.3).
- **Queues** (``num_queues``, default 2). Tiresias 3.2.3 leaves the choice of K and of the
  thresholds open and its sensitivity study (5.5) finds two queues enough; the authors'
  simulator sets the limits 3250, 7200, 18000 GPU-seconds (``simulator/jobs.py``,
  ``queue_limit``), of which K queues use the first K - 1 (so K <= 4 for the rules built on
  them).
- **Thresholds** (``thresholds``). 2D-LAS is information-agnostic: it needs no job lengths,
  and a threshold only separates jobs once it sits at the scale of the workload's jobs. On the
  simulator's own 60-job trace (our ``tiresias-60job``) the authors' values lie at 13x and
  29x the median job's ideal service (243 GPU-s); on Dally's multi-day jobs (median about
  150,000 GPU-s) every job crosses them within its first hour, so the queues stop separating
  short from long jobs and every job is preempted at its first demotion. The default
  ``thresholds="history"`` (our rule) therefore sets them from the cluster's history, as an
  operator would: before any job has finished there is no history, so there is one queue
  (no demotion, no preemption: 2D-LAS with a single queue is FIFO); once jobs finish, the
  authors' values times the median ideal GPU-service (GPUs x iterations x compute time per
  iteration) of the jobs finished so far over that of the 60-job trace
  (``REFERENCE_MEDIAN_GPU_S``), following the history as more jobs finish. ``"online"``
  is the same scaling with the authors' values used as they are until the first job
  finishes, and queues recomputed from the current thresholds at every decision (a job
  returns to a higher queue when the thresholds rise past its service). ``"fixed"`` (or an
  explicit list, which sets K itself) uses the values as they are. Two clairvoyant variants
  read the lengths of the whole workload, future arrivals included, and declare
  ``clairvoyant``: ``"scaled"`` (the same scaling by the median over every job of the run)
  and ``"quantiles"`` (the i/K quantiles, i = 1..K-1, of every job's ideal service,
  coinciding values merged; K up to 100). No job's own size is used to place it.
- **Preemption** (Tiresias 3.1): a waiting job that cannot be placed may preempt running
  jobs of strictly lower-priority queues, lowest queue first and, within a queue, the most
  recently started first, taking only as many as its placement needs and only when that frees
  a placement it accepts (the authors' simulator likewise preempts a job only for the
  higher-priority jobs that then run). Preempted jobs keep their progress (checkpoint +
  restore overhead in the engine).
- **Starvation** (PROMOTEKNOB, Tiresias 3.2.3; starvation freedom is one of the paper's
  design objectives, section 3): a waiting job below the top queue whose waiting time is at
  least ``promote_knob`` times its execution time goes back to the top queue, and both times
  restart from zero. Both count from the last promotion, and the waiting time from the job's
  first run after it (``promote_wait="total"``: every wait since then, as the authors'
  simulator counts it); ``promote_wait="last"`` counts only the current wait. The paper leaves
  the knob to the operator and studies its value in 5.5; the default 2 (our choice) is one of
  the values the authors' simulator sweeps (``dlas-gpu-2``); 0 disables promotion.
- **Placement** (Tiresias 3.3, Dally 3.2): a job is placed by the same rule when it first
  starts and whenever it resumes after a preemption (Tiresias 3.1). The paper consolidates a
  job whose skew (largest tensor / model size) exceeds a threshold, PACKLIMIT, which a linear
  classifier refits from the history of placements and their performance (3.3.2); models
  here carry only Dally's Table 1 skew classes, so the threshold lies between them (our
  choice). Models with high skew wait for the fewest machines they can use, whichever racks
  those are (Tiresias knows machines, not the rack tier; Dally 3.4 (i)); other models take any
  offer at once, packed onto as few machines as the free GPUs allow, again whatever their
  racks. (Packing rather than first fit: Tiresias is consolidation-aware at the machine
  level; a fully network-agnostic placement is Gandiva's.)
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Sequence

import numpy as np

from dlcluster_gym.errors import ConfigError
from dlcluster_gym.scheduler import BaseScheduler
from dlcluster_gym.sim.actions import Action, Preempt, Start
from dlcluster_gym.sim.offers import (
    FEWEST_MACHINES,
    PACKED,
    WAIT,
    Offer,
    OfferGen,
    drive,
    make_offer,
)
from dlcluster_gym.sim.view import ClusterView, Plan
from dlcluster_gym.workload.models import get_model

from .consolidation import make_room, wake_at_earliest

AUTHORS_QUEUE_LIMITS = (3250.0, 7200.0, 18000.0)  # the authors' simulator (GPU-seconds)
DEFAULT_NUM_QUEUES = 2  # Tiresias 5.5: two queues are enough
DEFAULT_THRESHOLDS = AUTHORS_QUEUE_LIMITS[: DEFAULT_NUM_QUEUES - 1]  # those K = 2 uses
# Median ideal GPU-service of the simulator's 60-job trace (tiresias-60job, seed 1, physics
# model profiles), the workload the authors' limits were set for
# (tests/test_tiresias_gandiva.py recomputes it).
REFERENCE_MEDIAN_GPU_S = 243.0
THRESHOLD_RULES = ("history", "online", "fixed", "scaled", "quantiles")
CLAIRVOYANT_RULES = ("scaled", "quantiles")  # read every job's length, future arrivals included
PROMOTE_WAITS = ("total", "last")
MAX_QUEUES = 100  # more queues than jobs separate nothing; a bound keeps the quantiles small
MAX_AUTHOR_QUEUES = len(AUTHORS_QUEUE_LIMITS) + 1


def base_thresholds(num_queues: int = DEFAULT_NUM_QUEUES) -> np.ndarray:
    """The first ``num_queues - 1`` of the authors' queue limits (GPU-seconds)."""
    return np.asarray(AUTHORS_QUEUE_LIMITS[: num_queues - 1], dtype=np.float64)


def scaled_thresholds(service: np.ndarray, num_queues: int = DEFAULT_NUM_QUEUES) -> np.ndarray:
    """The authors' limits (K - 1 of them) scaled by median(service) /
    REFERENCE_MEDIAN_GPU_S: the ``"scaled"`` rule, and ``"history"``/``"online"`` over the
    finished jobs. The limits as they are when ``service`` is empty."""
    if service.size == 0:
        return base_thresholds(num_queues)
    return thresholds_for_median(float(np.median(service)), num_queues)


def thresholds_for_median(median_gpu_s: float, num_queues: int = DEFAULT_NUM_QUEUES) -> np.ndarray:
    """The authors' limits (K - 1 of them) scaled by ``median_gpu_s`` /
    REFERENCE_MEDIAN_GPU_S."""
    return base_thresholds(num_queues) * median_gpu_s / REFERENCE_MEDIAN_GPU_S


def workload_thresholds(service: np.ndarray, num_queues: int) -> np.ndarray:
    """The i/K quantiles (i = 1..K-1) of the jobs' ideal GPU-service: the ``"quantiles"``
    rule. Coinciding values are merged; non-positive ones dropped."""
    if service.size == 0 or num_queues < 2:
        return np.empty(0)
    q = np.quantile(service, np.arange(1, num_queues) / num_queues)
    return np.unique(q[q > 0])


class Tiresias(BaseScheduler):
    """Discretized 2D-LAS (K queues), preemption, starvation promotion, skew consolidation.

    Arguments:
        thresholds: ``"history"`` (default), ``"online"``, ``"fixed"``, the clairvoyant
            ``"scaled"`` or ``"quantiles"``, or a list of increasing GPU-second values
            (which sets K itself; ``num_queues`` is then ignored).
        num_queues: K, the number of priority queues (default 2; at most 4 with the rules
            built on the authors' limits, at most 100 with ``"quantiles"``).
        promote_knob: PROMOTEKNOB (default 2); 0 disables the starvation promotion.
        promote_wait: ``"total"`` (default): the waiting time compared with the knob adds
            every wait since the job's first run after its last promotion; ``"last"``: only
            the current wait.
        preemption: whether a waiting job may preempt jobs of lower queues.
    """

    name = "tiresias"

    def __init__(
        self,
        *,
        thresholds: str | Sequence[float] = "history",
        num_queues: int = DEFAULT_NUM_QUEUES,
        promote_knob: float = 2.0,
        promote_wait: str = "total",
        preemption: bool = True,
    ) -> None:
        if isinstance(num_queues, bool) or not isinstance(num_queues, int) or num_queues < 2:
            raise ConfigError(f"num_queues must be an integer >= 2, got {num_queues!r}")
        if num_queues > MAX_QUEUES:
            raise ConfigError(
                f"num_queues must be at most {MAX_QUEUES} (priority queues of attained service), "
                f"got {num_queues!r}"
            )
        if isinstance(thresholds, str):
            if thresholds not in THRESHOLD_RULES:
                raise ConfigError(
                    f"thresholds must be one of {', '.join(THRESHOLD_RULES)} or a list of "
                    f"GPU-second values, got {thresholds!r}"
                )
            if thresholds != "quantiles" and num_queues > MAX_AUTHOR_QUEUES:
                raise ConfigError(
                    f"num_queues must be at most {MAX_AUTHOR_QUEUES} with "
                    f"thresholds={thresholds!r} (the authors' simulator sets "
                    f"{len(AUTHORS_QUEUE_LIMITS)} queue limits; use a list of thresholds or "
                    f"thresholds='quantiles' for more queues), got {num_queues!r}"
                )
            th = list(base_thresholds(num_queues)) if thresholds in ("fixed", "online") else []
        else:
            th = list(thresholds) if isinstance(thresholds, list | tuple) else None
            if th is None or not all(isinstance(t, int | float) and math.isfinite(t) for t in th):
                raise ConfigError(
                    f"thresholds must be a list of finite GPU-second values, got {thresholds!r}"
                )
            if any(t <= 0 for t in th) or any(b <= a for a, b in itertools.pairwise(th)):
                raise ConfigError(f"thresholds must be positive and increasing, got {thresholds!r}")
        if not isinstance(promote_knob, int | float) or not (
            math.isfinite(promote_knob) and promote_knob >= 0
        ):
            raise ConfigError(f"promote_knob must be a finite number >= 0, got {promote_knob!r}")
        if promote_wait not in PROMOTE_WAITS:
            raise ConfigError(
                f"promote_wait must be one of {', '.join(PROMOTE_WAITS)}, got {promote_wait!r}"
            )
        named = isinstance(thresholds, str)
        rule = thresholds if named else th
        super().__init__(
            thresholds=rule,
            num_queues=num_queues,
            promote_knob=promote_knob,
            promote_wait=promote_wait,
            preemption=preemption,
        )
        self.threshold_rule = thresholds if named else "fixed"
        self.clairvoyant = self.threshold_rule in CLAIRVOYANT_RULES
        self.num_queues = num_queues if named else len(th) + 1
        self.thresholds = np.asarray(th, dtype=np.float64)
        self._initial = self.thresholds.copy()
        self.promote_knob = float(promote_knob)
        self.promote_wait = promote_wait
        self.preemption = bool(preemption)
        # "online" recomputes every job's queue from the current thresholds; every other
        # rule keeps a job's queue until its next demotion or promotion (MLFQ).
        self._monotone = self.threshold_rule != "online"

    def reset(self, view: ClusterView, rng: np.random.Generator) -> None:
        super().reset(view, rng)
        n = view.num_job_ids
        self._demand = view.demand
        if self.threshold_rule in CLAIRVOYANT_RULES:
            ideal = np.array(
                [j.num_gpus * j.iterations * j.compute_s for j in view.oracle.jobs],
                dtype=np.float64,
            )
            if self.threshold_rule == "scaled":
                self.thresholds = scaled_thresholds(ideal, self.num_queues)
            else:
                self.thresholds = workload_thresholds(ideal, self.num_queues)
        else:
            self.thresholds = self._initial.copy()  # "history": none before any job finishes
        self._finished_seen = 0  # "history"/"online": finished jobs the thresholds were learnt from
        self._arrival = view.arrival_s
        self._high_skew = view.per_job(lambda j: get_model(j.model).skew == "high", bool)
        # Attained service and run time at the last promotion (2D-LAS counts from there).
        self._service_base = np.zeros(n)
        self._run_base = np.zeros(n)
        # promote_wait="total": the job's time not holding GPUs (since arrival) when it first
        # ran after its last promotion; NaN until then.
        self._idle_base = np.full(n, np.nan)
        self._queue = np.zeros(n, dtype=np.int64)  # MLFQ queue (rules other than "online")
        self._next_wake = math.inf
        self._pos = np.zeros(n, dtype=np.int64)  # scratch: job id -> index in this call
        self.promotions = 0

    def place(self, plan: Plan, job: int) -> np.ndarray | None:
        """High skew: the fewest machines it could ever use (or wait); otherwise any free
        GPUs, packed onto as few machines as they allow."""
        n = int(self._demand[job])
        if plan.num_free < n:
            return None
        if self._high_skew[job]:
            if n <= plan.cluster.max_gpus_per_machine and int(plan.free_per_machine.max()) < n:
                return None
            return plan.fewest_machines(n)
        return plan.fewest_machines(n, strict=False)

    def queues(self, service: np.ndarray) -> np.ndarray:
        """Queue index (0 = highest priority) for attained service values."""
        return np.searchsorted(self.thresholds, service, side="right")

    def learn_thresholds(self, view: ClusterView) -> None:
        """``"history"``/``"online"``: rescale by the finished jobs' median ideal GPU-service
        when a job finished since the last call."""
        if self.threshold_rule not in ("history", "online"):
            return
        if view.history.count == self._finished_seen:
            return
        self._finished_seen = view.history.count
        median = view.history.median_gpu_service_s()
        if median is not None:
            self.thresholds = thresholds_for_median(median, self.num_queues)

    def schedule(self, view: ClusterView) -> Sequence[Action]:
        return drive(self.offers(view), self.choose)

    def choose(self, offer: Offer) -> int:
        """Skew-based consolidation (Tiresias 3.3): a high-skew job takes the fewest
        machines it could ever use or waits; any other job packs onto the fewest machines
        of what is free."""
        slot = FEWEST_MACHINES if self._high_skew[offer.job] else PACKED
        return slot if offer.mask[slot] else WAIT

    def _waited(
        self, ids: np.ndarray, now: float, run: np.ndarray, since: np.ndarray
    ) -> np.ndarray:
        """The waiting time compared with PROMOTEKNOB (``promote_wait``), for waiting jobs."""
        if self.promote_wait == "last":
            return now - since
        idle = now - self._arrival[ids] - run
        return np.where(np.isnan(self._idle_base[ids]), 0.0, idle - self._idle_base[ids])

    def offers(self, view: ClusterView) -> OfferGen:
        """2D-LAS order (with promotion); each job is offered the free GPUs, and, when it
        declines or nothing fits, the GPUs freed by preempting the fewest lower-queue jobs."""
        self.learn_thresholds(view)
        now = view.now
        waiting = np.fromiter(view.iter_waiting(), dtype=np.int64, count=view.num_waiting)
        running = np.asarray(view.running(), dtype=np.int64)
        if waiting.size == 0:
            return ()
        ids = np.concatenate((waiting, running))
        _, run, attained = view.live(ids)
        service = attained - self._service_base[ids]
        executed = run - self._run_base[ids]
        since = np.asarray(view.wait_since)[ids]
        is_wait = np.zeros(ids.size, dtype=bool)
        is_wait[: waiting.size] = True
        q = self.queues(service)
        if self._monotone:
            q = np.maximum(q, self._queue[ids])
            self._queue[ids] = q
        if self.promote_knob > 0:
            waited = self._waited(ids, now, run, since)
            starving = is_wait & (q > 0) & (executed > 0) & (waited >= self.promote_knob * executed)
            if starving.any():
                s = ids[starving]
                self._service_base[s] = attained[starving]
                self._run_base[s] = run[starving]
                self._idle_base[s] = np.nan
                self._queue[s] = 0
                service[starving] = 0.0
                executed[starving] = 0.0
                q[starving] = 0
                self.promotions += int(starving.sum())
        plan = view.plan()
        q_wait, q_run = q[: waiting.size], q[waiting.size :]
        order = np.lexsort((waiting, self._arrival[waiting], q_wait))
        # Victims: lowest priority first (highest queue), then the most recently started.
        vorder = np.lexsort((-np.asarray(view.last_start_s)[running], -q_run))
        victims, victim_q = running[vorder], q_run[vorder]
        victim_open = np.ones(victims.size, dtype=bool)
        top_victim_q = int(victim_q[0]) if self.preemption and victims.size else -1
        failed: set[tuple[int, int, bool]] = set()  # what cannot fit stays unfit this call
        in_order = waiting[order]  # plain lists: this loop runs at every decision
        for job, qj, n, skew, wait_since in zip(
            in_order.tolist(),
            q_wait[order].tolist(),
            self._demand[in_order].tolist(),
            self._high_skew[in_order].tolist(),
            since[: waiting.size][order].tolist(),
            strict=True,
        ):
            if qj >= top_victim_q and plan.num_free == 0:
                break  # no free GPUs and nobody left that this or any later job may preempt
            key = (qj, n, skew)
            if key in failed:
                continue
            starv = now - wait_since
            gpus = None
            if plan.num_free >= n:
                offer = make_offer(plan, job, n, starv)
                gpus = offer.placement((yield offer))
            if gpus is None and qj < top_victim_q:
                kept = victim_open.copy()
                trial, room = self._preempt_for(plan, job, qj, victims, victim_q, victim_open)
                if room is not None:
                    preempted = len(trial.actions) - len(plan.actions)
                    offer = make_offer(trial, job, n, starv, victims=preempted)
                    gpus = offer.placement((yield offer))
                    if gpus is None:
                        victim_open[:] = kept  # declined: nobody is preempted for it
                    else:
                        plan = trial
            if gpus is None:
                failed.add(key)
            else:
                plan.start(job, gpus)
        # State after this decision: who runs, who waits (and since when).
        runs = ~is_wait
        since = since.copy()
        pos = self._pos
        pos[ids] = np.arange(ids.size)
        for a in plan.actions:
            if isinstance(a, Start):
                k = pos[a.job]
                runs[k] = True
                if np.isnan(self._idle_base[a.job]):  # first run since the last promotion
                    self._idle_base[a.job] = now - self._arrival[a.job] - run[k]
            elif isinstance(a, Preempt):
                runs[pos[a.job]] = False
                since[pos[a.job]] = now
        self._wake(plan, now, ids, runs, since, q, service, executed, run)
        return plan.actions

    def _preempt_for(
        self,
        plan: Plan,
        job: int,
        q_job: int,
        victims: np.ndarray,
        victim_q: np.ndarray,
        victim_open: np.ndarray,
    ) -> tuple[Plan, np.ndarray | None]:
        """Preempt the fewest jobs of strictly lower queues that make room for ``job``."""
        lower = victim_open & (victim_q > q_job)
        plan, gpus = make_room(
            plan,
            lambda p: self.place(p, job),
            int(self._demand[job]),
            victims,
            self._demand[victims],
            lower,
        )
        victim_open &= ~(victim_q > q_job) | lower
        return plan, gpus

    def _wake(
        self,
        plan: Plan,
        now: float,
        ids: np.ndarray,
        runs: np.ndarray,
        since: np.ndarray,
        q: np.ndarray,
        service: np.ndarray,
        executed: np.ndarray,
        run: np.ndarray,
    ) -> None:
        """Wake up at the next demotion of a running job or promotion of a waiting one."""
        lower = q < self.thresholds.size
        dem = runs & lower
        times = [now + (self.thresholds[q[dem]] - service[dem]) / self._demand[ids[dem]]]
        if self.promote_knob > 0:
            starving = ~runs & (q > 0) & (executed > 0)
            due = self.promote_knob * executed[starving]
            if self.promote_wait == "last":
                times.append(since[starving] + due)
            else:
                times.append(
                    now + due - self._waited(ids[starving], now, run[starving], since[starving])
                )
        self._next_wake = wake_at_earliest(plan, np.concatenate(times), now, self._next_wake)

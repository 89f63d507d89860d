"""Dally: delay scheduling, auto-tuned delay timers and network-sensitive preemption.

Section numbers refer to Dally (../shared/papers/dally-network-sensitive-scheduling.txt).

Global scheduler (4.3): jobs wait in a wait queue; whenever something changes (an arrival, a
completion, or a delay timer expiring; the engine calls the policy at exactly those instants)
the free GPUs are offered to waiting jobs in increasing order of

    Nw_sens = W_compl / T_norm,  W_compl = I_compl / I_total,  T_norm = T_run / (t_comp x I_total)

(4.3.1), i.e. the ideal compute time of the work done over the time spent holding GPUs (1.0
means no network slowdown). Each job's local scheduler answers an offer with Algorithm 1: take
one machine if the offer has one that fits; otherwise reject until the machine timer T_Mc has
expired; then take one rack if it fits; otherwise reject until the rack timer T_Rk has expired;
then take any placement. T_Rk is compared with the total starvation time (Algorithm 1 line 18),
so the paper's manual setting of "12 h, then another 12 h" is T_Mc = 12 h, T_Rk = 24 h (4.3.2).
A job that cannot fit on one machine has T_Mc = 0; one that cannot fit on one rack has both
timers 0 (4.3.2). Starvation time = now - the time the job last entered the wait queue (its
arrival, or its last preemption: ``get_last_resource_assignment_time`` of Algorithm 1).

Auto-tuner (4.3.3, Algorithm 2): every acceptance at machine or rack level appends the job's
starvation time to the list of (that level, that GPU demand) (Algorithm 1 lines 7 and 15); values
larger than HISTORY_TIME_LIMIT are removed from the list (Algorithm 2 lines 2-6 and 8-12); a
timer is the mean of its list plus two sample standard deviations (Algorithm 2 line 13, 4.3.3
"adding two sample standard deviations"). This value cut-off is the default
(``history_mode="value"``).

Choices the paper leaves open (all are parameters):

- **Nw_sens of a job that has never run** (0/0): 1.0, "no network slowdown observed yet".
  Setting it to 0 would put every new job ahead of every job that has run, and with preemption
  by priority that is the preemption churn Tiresias avoids by discretizing its queues (3.4).
  Ties in Nw_sens go to the job that has waited longest (then the lower job id).
- **Timers from a short list**: an empty list gives the paper's manual defaults (12 h / 24 h);
  one sample gives that sample (a sample standard deviation needs two).
- **HISTORY_TIME_LIMIT**: Algorithm 2 (lines 3-4 and 9-10) removes every wait larger than the
  limit, which the text also calls a "sliding window size" (4.3.3). ``history_mode="value"``
  (default, Algorithm 2 as written) keeps the samples whose value is at most
  ``history_limit_s``, however old; a value is dropped when it is recorded, which gives the
  same lists as removing it when the timers are read (a value and the limit never change).
  ``history_mode="window"`` (our variant, the text's "sliding window" read as time) keeps the
  samples recorded in the last ``history_limit_s`` of simulated time, whatever their value.
- **History limit default and cluster size**: 4.3.3 advises a smaller limit for larger
  clusters (more jobs are placed per unit time). Default: 48 h x 512 / (GPUs in the cluster),
  i.e. 48 h on the 8-rack cluster of 5.1.2, 192 h on 2 racks, 24 h on 16 racks.
- **Network-sensitive preemption** (4.3, 4.3.1, 5.2.3). The paper: "Upon preemption, the job
  is reintroduced into the wait queue and remains there until it accepts another resource
  offer", offers go in increasing Nw_sens, and the preemption "prioritizes providing
  better-consolidated placements to jobs suffering from sub-optimal placements". It does not
  say when a job is preempted. ``preemption`` chooses how:

  - ``"requeue"`` (default, the paper's mechanism): at a scheduling instant, every running job
    placed wider than the tightest tier it could have ("suffering") for which the free GPUs
    of that instant hold a placement at that tightest tier (one machine, or one rack for jobs
    larger than a machine) and for which the move pays its checkpoint + restore
    (``baselines.consolidation.worth_moving``) is preempted. Each job is judged on its own
    against the same free GPUs (the global scheduler does not pair victims with offers). The
    victims go back to the wait queue (starvation clock restarted at the preemption), and
    the free GPUs, theirs included, are offered to the whole wait queue in increasing
    Nw_sens. A victim has Nw_sens < 1 so it is offered before every job that has not run;
    when two victims want the same machine, the lower Nw_sens gets it and the other waits
    in the queue (Algorithm 1 with its restarted starvation: it rejects wider offers until
    its timers expire) and is offered the next free GPUs before newer jobs. Acceptances of
    victims update the auto-tuner's lists like any acceptance (Algorithm 1 lines 7, 15).
  - ``"relocate"`` (our extension, the earlier default): the same suffering jobs are
    offered their tightest tier in the same Nw_sens order as the waiting jobs, and one that
    gets it is preempted and restarted there at the same instant (a move paying checkpoint +
    restore); it never waits, so every waiting job has Nw_sens = 1 and the order is FIFO.
    Relocations are not recorded in the auto-tuner's lists (nobody waited for them).
  - ``"none"``: no preemption. ``True``/``False`` are accepted as ``"requeue"``/``"none"``.
- **What a job has left** (``remaining``): the move test above needs a running job's
  remaining iterations. The paper's Nw_sens reads the total expected iterations
  I_total-expected, which "can be readily obtained from ... benchmarks" or extrapolated
  (4.3.1), but it cancels out of Nw_sens (W_compl / T_norm = I_compl x t_comp / T_run), so
  the priority needs no length. For the move test the default ``"history"`` estimates it
  from the lengths of the jobs finished so far (``sim.estimators``): the expected remaining
  work of a job that has done this much. ``"attained"`` and ``"model-history"`` are the other
  estimators; ``"known"`` reads the true remaining iterations (a clairvoyant variant, ranked
  apart).
- Within a tier, placements are best fit: the machine (rack) with the fewest free GPUs that
  holds the job; network placements pack onto as few racks and machines as possible.
"""

from __future__ import annotations

import math
from collections import deque
from collections.abc import Callable, Sequence

import numpy as np

from dlcluster_gym.cluster.topology import Tier
from dlcluster_gym.errors import ConfigError
from dlcluster_gym.scheduler import BaseScheduler
from dlcluster_gym.sim.actions import Action
from dlcluster_gym.sim.offers import MACHINE as MACHINE_SLOT
from dlcluster_gym.sim.offers import NETWORK as NETWORK_SLOT
from dlcluster_gym.sim.offers import RACK as RACK_SLOT
from dlcluster_gym.sim.offers import WAIT, Offer, OfferGen, drive, make_offer
from dlcluster_gym.sim.view import ClusterView

from .consolidation import best_possible_tier, check_remaining, wake_at_earliest, worth_moving

HOUR = 3600.0
MANUAL_MACHINE_TIMER_S = 12 * HOUR  # 4.3.2
MANUAL_RACK_TIMER_S = 24 * HOUR  # 4.3.2: another 12 h after the machine timer
TIMER_STDS = 2.0  # Algorithm 2 line 13, 4.3.3: mean + two sample standard deviations
# HISTORY_TIME_LIMIT (Algorithm 2 lines 3, 9): the paper gives no value, only "a smaller history
# time limit" for larger clusters (4.3.3). Ours: this limit on the reference cluster ...
HISTORY_REF_S = 48 * HOUR
HISTORY_REF_GPUS = 512  # ... of 8 racks x 8 machines x 8 GPUs (5.1.2), scaled by 512 / GPUs
HISTORY_MODES = ("value", "window")  # Algorithm 2 as written (default); our time window
MACHINE, RACK, NETWORK = int(Tier.MACHINE), int(Tier.RACK), int(Tier.NETWORK)
SMALL_QUEUE = 64  # up to this many jobs to offer, ``offers`` runs on Python scalars


PREEMPTION_MODES = ("requeue", "relocate", "none")


def preemption_mode(value: str | bool) -> str:
    """Normalize the ``preemption`` parameter: a mode name, or True/False (requeue/none)."""
    if value is True:
        return "requeue"
    if value is False:
        return "none"
    if isinstance(value, str) and value in PREEMPTION_MODES:
        return value
    raise ConfigError(
        f"preemption must be one of {', '.join(PREEMPTION_MODES)} (or true/false), got {value!r}"
    )


def _check_time(name: str, value: float | None, allow_none: bool = False) -> None:
    if value is None and allow_none:
        return
    if not isinstance(value, int | float) or not math.isfinite(value) or value < 0:
        raise ConfigError(f"{name} must be a finite number of seconds >= 0, got {value!r}")


class WaitHistory:
    """The auto-tuner's wait-time lists (Algorithm 2), one per (level, GPU demand).

    ``mode="value"`` (Algorithm 2 as written): a wait larger than ``limit_s`` never enters a
    list. ``mode="window"`` (our variant): a wait leaves its list ``limit_s`` after it was
    recorded. Keeps running sums so a timer costs O(1) however long the list is.
    """

    def __init__(self, limit_s: float, mode: str = "value") -> None:
        if mode not in HISTORY_MODES:
            raise ConfigError(f"history_mode must be 'window' or 'value', got {mode!r}")
        self.limit_s = limit_s
        self.mode = mode
        self._lists: dict[tuple[int, int], deque[tuple[float, float]]] = {}
        self._sums: dict[tuple[int, int], list[float]] = {}
        # timer per list, valid until the list changes (an add or an expiry): a pure
        # function of the running sums and the count, so the cached value is the same float
        self._timer: dict[tuple[int, int], float | None] = {}

    def add(self, level: int, demand: int, now: float, starvation_s: float) -> None:
        """``update_demand_delay`` of Algorithm 1 (lines 7 and 15)."""
        if self.mode == "value" and starvation_s > self.limit_s:
            return  # Algorithm 2 lines 3-4 / 9-10: "if time > HISTORY_TIME_LIMIT: remove time"
        key = (level, demand)
        self._timer.pop(key, None)
        self._lists.setdefault(key, deque()).append((now, starvation_s))
        s = self._sums.setdefault(key, [0.0, 0.0])
        s[0] += starvation_s
        s[1] += starvation_s * starvation_s

    def samples(self, level: int, demand: int, now: float) -> list[float]:
        self._expire((level, demand), now)
        return [v for _, v in self._lists.get((level, demand), ())]

    def _expire(self, key: tuple[int, int], now: float) -> None:
        q = self._lists.get(key)
        if not q or self.mode != "window":
            return
        if not q[0][0] < now - self.limit_s:
            return  # nothing expires (the usual case)
        self._timer.pop(key, None)
        s = self._sums[key]
        while q and q[0][0] < now - self.limit_s:
            _, v = q.popleft()
            s[0] -= v
            s[1] -= v * v
        if not q:
            s[0] = s[1] = 0.0

    def timer(self, level: int, demand: int, now: float) -> float | None:
        """Mean + 2 sample standard deviations of the list (Algorithm 2 line 13); None when the
        list is empty."""
        key = (level, demand)
        self._expire(key, now)
        got = self._timer.get(key, False)
        if got is not False:
            return got
        got = self._timer[key] = self._compute_timer(key)
        return got

    def _compute_timer(self, key: tuple[int, int]) -> float | None:
        q = self._lists.get(key)
        if not q:
            return None
        n = len(q)
        total, sq = self._sums[key]
        mean = total / n
        if n == 1:
            return max(mean, 0.0)
        var = max((sq - n * mean * mean) / (n - 1), 0.0)  # sample variance (4.3.3)
        return max(mean + TIMER_STDS * math.sqrt(var), 0.0)


class Dally(BaseScheduler):
    """Dally with the auto-tuner (Algorithms 1 and 2) and network-sensitive preemption."""

    name = "dally"
    # Shortcuts that give the same decisions as the general loop; False runs the
    # general loop everywhere (tests compare the two).
    fast_paths: bool = True

    def __init__(
        self,
        *,
        history_limit_s: float | None = None,
        history_mode: str = "value",
        default_machine_timer_s: float = MANUAL_MACHINE_TIMER_S,
        default_rack_timer_s: float = MANUAL_RACK_TIMER_S,
        preemption: str | bool = "requeue",
        remaining: str = "history",
    ) -> None:
        _check_time("history_limit_s", history_limit_s, allow_none=True)
        _check_time("default_machine_timer_s", default_machine_timer_s)
        _check_time("default_rack_timer_s", default_rack_timer_s)
        if history_mode not in HISTORY_MODES:
            raise ConfigError(f"history_mode must be 'window' or 'value', got {history_mode!r}")
        preemption = preemption_mode(preemption)
        super().__init__(
            history_limit_s=history_limit_s,
            history_mode=history_mode,
            default_machine_timer_s=default_machine_timer_s,
            default_rack_timer_s=default_rack_timer_s,
            preemption=preemption,
            remaining=check_remaining(remaining),
        )
        self.remaining = remaining
        self.clairvoyant = remaining == "known"
        self.history_limit_s = history_limit_s
        self.history_mode = history_mode
        self.default_machine_timer_s = float(default_machine_timer_s)
        self.default_rack_timer_s = float(default_rack_timer_s)
        self.preemption = preemption
        self.history = WaitHistory(history_limit_s or HISTORY_REF_S, history_mode)
        self.timer_override: Callable[[int], tuple[float, float]] | None = None

    # ---------------------------------------------------------------- setup
    def reset(self, view: ClusterView, rng: np.random.Generator) -> None:
        super().reset(view, rng)
        cluster = view.cluster
        limit = self.history_limit_s
        if limit is None:
            limit = HISTORY_REF_S * HISTORY_REF_GPUS / cluster.num_gpus
        self.history = WaitHistory(limit, self.history_mode)
        self._max_machine = cluster.max_gpus_per_machine
        self._max_rack = cluster.max_gpus_per_rack
        # Per-job facts, filled as jobs arrive (``_sync``): live arrays of the view, and
        # Python lists of the same values for the short-queue path.
        n = view.num_job_ids
        self._demand = view.demand
        self._compute = view.compute_s
        self._best = np.full(n, -1, dtype=np.int8)
        self._demand_l = [0] * n
        self._best_l = [-1] * n
        self._compute_l = [math.nan] * n
        self._seen = 0  # arrivals synced
        self._tier = np.full(n, -1, dtype=np.int8)  # tier of current placement
        # Jobs started wider than their tightest tier and maybe still running: a superset of
        # the "suffering" jobs, so a decision scans the running jobs only when it is not empty.
        self._suffering: set[int] = set()
        self._next_wake = math.inf
        self.relocations = 0
        self.requeues = 0

    def _sync(self, view: ClusterView) -> None:
        """Take in the jobs that arrived since the last call (their demand, compute per
        iteration and tightest possible tier)."""
        new = view.arrivals(self._seen)
        if not new:
            return
        self._seen += len(new)
        cluster = view.cluster
        for j in new:
            info = view.jobs[j]
            b = int(best_possible_tier(cluster, info.num_gpus))
            self._best[j] = self._best_l[j] = b
            self._demand_l[j] = info.num_gpus
            self._compute_l[j] = info.compute_s

    # ---------------------------------------------------------------- timers
    def timers(self, demand: int, now: float) -> tuple[float, float]:
        """(T_Mc, T_Rk) for a job demanding ``demand`` GPUs (Algorithm 2, 4.3.2 zeros).

        ``timer_override`` (set by the DelayTimer env) replaces Algorithm 2's estimate:
        a function of the demand returning (T_Mc, T_Rk); the 4.3.2 zeros still apply."""
        if demand > self._max_rack:
            return 0.0, 0.0
        if self.timer_override is not None:
            tm, tr = self.timer_override(demand)
            return (0.0 if demand > self._max_machine else tm), tr
        tr = self.history.timer(RACK, demand, now)
        tr = self.default_rack_timer_s if tr is None else tr
        if demand > self._max_machine:
            return 0.0, tr
        tm = self.history.timer(MACHINE, demand, now)
        return (self.default_machine_timer_s if tm is None else tm), tr

    def record(self, level: int, demand: int, now: float, starvation_s: float) -> None:
        """An acceptance at ``level`` (Algorithm 1 lines 7 and 15)."""
        self.history.add(level, demand, now, starvation_s)

    def _timer_vectors(self, demand: np.ndarray, now: float) -> tuple[np.ndarray, np.ndarray]:
        if demand.size <= 64:  # short queues: a dict beats np.unique
            pairs_of = {d: self.timers(d, now) for d in set(demand.tolist())}
            pairs = np.array([pairs_of[d] for d in demand.tolist()], dtype=np.float64)
            pairs = pairs.reshape(-1, 2)
            return pairs[:, 0], pairs[:, 1]
        uniq, inv = np.unique(demand, return_inverse=True)
        pairs = np.array([self.timers(int(d), now) for d in uniq], dtype=np.float64)
        pairs = pairs.reshape(-1, 2)
        return pairs[inv, 0], pairs[inv, 1]

    # ---------------------------------------------------------------- priority
    def nw_sens(self, view: ClusterView, jobs: np.ndarray) -> np.ndarray:
        """Nw_sens = W_compl / T_norm (4.3.1) = ideal compute time of the work done / time held;
        1.0 for a job that has not run yet."""
        done, run, _ = view.live(jobs)
        ideal = done * self._compute[jobs]
        out = np.ones(jobs.size)
        ran = run > 0
        out[ran] = ideal[ran] / run[ran]
        return out

    # ---------------------------------------------------------------- offers
    def schedule(self, view: ClusterView) -> Sequence[Action]:
        native = self.fast_paths and type(self).choose is Dally.choose
        return drive(self.offers(view, native=native), self.choose)

    @staticmethod
    def choose(offer: Offer) -> int:
        """The job's local scheduler (Algorithm 1) answering an offer: one machine if it
        fits; after the machine timer one rack; after the rack timer any placement; else
        wait (reject the offer)."""
        m = offer.mask
        if m[MACHINE_SLOT]:
            return MACHINE_SLOT
        if offer.past_machine_timer:
            if m[RACK_SLOT]:
                return RACK_SLOT
            if offer.past_rack_timer and m[NETWORK_SLOT]:
                return NETWORK_SLOT
        return WAIT

    def offers(self, view: ClusterView, *, native: bool = False) -> OfferGen:
        """Offer the free GPUs to waiting jobs in increasing Nw_sens (4.3.1). With
        ``preemption="requeue"`` the suffering running jobs whose tightest tier is free are
        first preempted into the wait queue (4.3); with ``"relocate"`` they are offered
        their tightest tier in the same order and moved at once. Every start or relocation
        changes the free GPUs, so the jobs that declined are offered again (from the front
        of the order).

        ``native`` (``schedule``, answers from :meth:`choose`): the answer of ``choose`` is a
        function of the free-GPU counts, the job's demand, starvation and timers, so it is
        computed for the whole queue at once and only the first job that accepts is offered
        the GPUs; the jobs before it would decline, and a decline changes nothing."""
        self._sync(view)
        fast = self.fast_paths
        if fast and view.num_waiting == 0 and not self._suffering:
            return ()  # nobody to offer GPUs to or to move (same answer as below, sooner)
        plan = view.plan()
        if plan.num_free == 0:
            return ()  # nothing to offer; the next completion calls us again
        now = view.now
        # who is offered: Python lists (short in the Placement env), arrays below if long
        waiting_l = list(view.iter_waiting())
        movers_l: list[int] = []
        requeued_l: list[int] = []
        if self.preemption != "none" and (self._suffering or not fast):
            running = view.running()
            if len(running) <= SMALL_QUEUE:
                tier, best_l = self._tier, self._best_l
                movers_l = [j for j in running if tier[j] > best_l[j]]
            else:
                r = np.asarray(running, dtype=np.int64)
                movers_l = r[self._tier[r] > self._best[r]].tolist()
            self._suffering = set(movers_l)
        if self.preemption == "requeue" and movers_l:
            requeued_l = self._requeue(view, plan, movers_l)
            waiting_l += requeued_l
            movers_l = []
        n_ids = len(waiting_l) + len(movers_l)
        if n_ids == 0:
            return ()
        if fast and n_ids == 1 and not movers_l and not requeued_l:
            return (yield from self._offer_one(view, plan, waiting_l[0]))
        if fast and not movers_l and n_ids <= SMALL_QUEUE:
            ws = view.wait_since
            k = n_ids - len(requeued_l)
            # requeued jobs (the tail) are back in the wait queue from now (4.3)
            since_l = [float(ws[j]) for j in waiting_l[:k]] + [now] * len(requeued_l)
            nq = len(requeued_l)
            return (yield from self._offer_small(view, plan, waiting_l, since_l, nq, native))
        waiting = np.asarray(waiting_l, dtype=np.int64)
        movers = np.asarray(movers_l, dtype=np.int64)
        requeued = np.asarray(requeued_l, dtype=np.int64)
        ids = np.concatenate((waiting, movers))
        since = np.asarray(view.wait_since)[ids]
        if requeued.size:  # the tail of ids (requeueing leaves no movers to relocate)
            since[ids.size - requeued.size :] = now  # back in the wait queue from now (4.3)
        is_run = np.zeros(ids.size, dtype=bool)
        is_run[waiting.size :] = True
        if ids.size > 1 or not fast:  # one job (the usual case on traces) needs no order
            order = np.lexsort((ids, since, self.nw_sens(view, ids)))
            ids, is_run, since = ids[order], is_run[order], since[order]
        demand = self._demand[ids]
        best = self._best[ids]
        starv = now - since
        t_mc, t_rk = self._timer_vectors(demand, now)
        open_ = np.ones(ids.size, dtype=bool)
        declined = np.zeros(ids.size, dtype=bool)
        cluster = view.cluster
        any_movers = bool(movers.size)
        is_wait = ~is_run
        while True:
            fits = demand <= plan.num_free
            if any_movers or native:
                fm = int(plan.free_per_machine.max())
                fr = int(plan.free_per_rack.max())
            if native:  # Algorithm 1's answer (``choose``) for every job at once
                past_mc = starv >= t_mc
                fits &= (demand <= fm) | (past_mc & ((demand <= fr) | (starv >= t_rk)))
            if any_movers:
                moves = is_run & (
                    ((best == MACHINE) & (demand <= fm)) | ((best == RACK) & (demand <= fr))
                )
                ok = open_ & ~declined & ((is_wait & fits) | moves)
            else:
                ok = open_ & ~declined & fits
            k = int(np.argmax(ok))
            if not ok[k]:
                break
            job, n = int(ids[k]), int(demand[k])
            if is_run[k]:
                open_[k] = False
                gpus = plan.find(n, tier=Tier(int(best[k])))
                if gpus is None or not worth_moving(view, job, gpus, self.remaining):
                    continue
                plan.preempt(job)
                plan.start(job, gpus)
                self._tier[job] = best[k]
                self.relocations += 1
                declined[:] = False
                continue
            offer = make_offer(plan, job, n, float(starv[k]), (float(t_mc[k]), float(t_rk[k])))
            gpus = offer.placement((yield offer))
            if gpus is None:
                declined[k] = True
                continue
            open_[k] = False
            declined[:] = False
            if self._accept(cluster, plan, job, gpus, n, int(best[k]), now, float(starv[k])):
                same = demand == n
                t_mc[same], t_rk[same] = self.timers(n, now)
        self._wake_at_next_timer(plan, now, starv, t_mc, t_rk, since, open_ & ~is_run)
        return plan.actions

    def _offer_small(
        self,
        view: ClusterView,
        plan,
        ids_l: list[int],
        since_l: list[float],
        num_requeued: int,
        native: bool,
    ) -> OfferGen:
        """``offers`` for a short wait queue and no relocations (the usual case in the
        Placement env): the same order (increasing Nw_sens, 4.3.1; ties to the longest
        wait, then the lower id), the same offers, Algorithm 1 answers, auto-tuner updates
        (Algorithm 1 lines 7, 15) and timer wake-up as the array loop, on Python scalars
        (small-array numpy costs more than the work here). Every float is computed by the
        same operations in the same order, so decisions are identical."""
        now = view.now
        nws = self._nw_sens_small(view, ids_l, num_requeued)
        order = sorted(range(len(ids_l)), key=lambda i: (nws[i], since_l[i], ids_l[i]))
        jobs = [ids_l[i] for i in order]
        since_l = [since_l[i] for i in order]
        dem, best_of = self._demand_l, self._best_l
        demand = [dem[j] for j in jobs]
        starv = [now - s for s in since_l]
        timers = {}
        for d in demand:
            if d not in timers:
                tm, tr = self.timers(d, now)
                timers[d] = (float(tm), float(tr))
        open_ = [True] * len(jobs)
        declined = [False] * len(jobs)
        cluster = view.cluster
        while True:
            nf = plan.num_free
            if native:
                fm = max(plan.free_per_machine.tolist())
                fr = max(plan.free_per_rack.tolist())
            k = -1
            for i, n in enumerate(demand):
                if not open_[i] or declined[i] or n > nf:
                    continue
                if native and n > fm:  # Algorithm 1 (``choose``) declines unless past timers
                    t_mc, t_rk = timers[n]
                    st = starv[i]
                    if not (st >= t_mc and (n <= fr or st >= t_rk)):
                        continue
                k = i
                break
            if k < 0:
                break
            job, n, st = jobs[k], demand[k], starv[k]
            offer = make_offer(plan, job, n, st, timers[n])
            gpus = offer.placement((yield offer))
            if gpus is None:
                declined[k] = True
                continue
            open_[k] = False
            declined = [False] * len(jobs)
            if self._accept(cluster, plan, job, gpus, n, best_of[job], now, st):
                tm, tr = self.timers(n, now)
                timers[n] = (float(tm), float(tr))
        # wake up when the next waiting job's timer expires (its answer changes):
        # ``wake_at_earliest`` on scalars
        wake = None
        for i, o in enumerate(open_):
            if o:
                t_mc, t_rk = timers[demand[i]]
                for t in (since_l[i] + t_mc, since_l[i] + t_rk):
                    if t > now and (wake is None or t < wake):
                        wake = t
        pending = self._next_wake
        if wake is not None and (wake < pending or pending <= now):
            plan.wake_up(wake)
            self._next_wake = wake
        return plan.actions

    def _nw_sens_small(self, view: ClusterView, ids: list[int], num_requeued: int) -> list[float]:
        """``nw_sens`` of ``ids`` whose last ``num_requeued`` are the running jobs requeued
        at this instant: the waiting ones from their counters (current while they wait),
        the requeued ones from ``live``; the same float operations as ``nw_sens``."""
        k = len(ids) - num_requeued
        done, run, comp = view.done_iters, view.run_time_s, self._compute_l
        out = []
        for j in ids[:k]:
            r = float(run[j])
            out.append(float(done[j]) * comp[j] / r if r > 0 else 1.0)
        if num_requeued:
            out += self.nw_sens(view, np.asarray(ids[k:], dtype=np.int64)).tolist()
        return out

    def _accept(
        self, cluster, plan, job: int, gpus, n: int, best: int, now: float, starvation_s: float
    ) -> bool:
        """Start ``job`` on the ``gpus`` it accepted: its tier, whether it runs wider than its
        tightest tier (a candidate for preemption, 4.3), and Algorithm 1's auto-tuner update
        (lines 7, 15: acceptances within the network tier are not recorded). True when the
        timers of demand ``n`` changed."""
        plan.start(job, gpus)
        tier = int(cluster.placement_tier(gpus))
        self._tier[job] = tier
        if tier > best:
            self._suffering.add(job)
        if tier == NETWORK:
            return False
        self.record(tier, n, now, starvation_s)
        return True

    def _offer_one(self, view: ClusterView, plan, job: int) -> OfferGen:
        """``offers`` when the only candidate is one waiting job (most instants on the
        traces): the same offer (4.3), Algorithm 1 answer, auto-tuner update (Algorithm 1
        lines 7, 15) and timer wake-up as the loop above, on scalars (no order to compute,
        no per-job arrays)."""
        now = view.now
        n = int(self._demand[job])
        since = float(view.wait_since[job])
        starv = now - since
        t_mc, t_rk = self.timers(n, now)
        if n <= plan.num_free:
            offer = make_offer(plan, job, n, starv, (t_mc, t_rk))
            gpus = offer.placement((yield offer))
            if gpus is not None:
                self._accept(view.cluster, plan, job, gpus, n, self._best[job], now, starv)
                return plan.actions
        expiries = np.array([since + t_mc, since + t_rk])
        self._next_wake = wake_at_earliest(plan, expiries, now, self._next_wake)
        return plan.actions

    def _requeue(self, view: ClusterView, plan, movers: list[int]) -> list[int]:
        """Preempt the suffering running jobs (``movers``) whose tightest tier the free GPUs
        of this instant hold and for which the move pays (4.3, 4.3.1, 5.2.3); each is judged
        alone against the same free GPUs. Returns the victims, now in the wait queue."""
        fm = max(plan.free_per_machine.tolist())
        fr = max(plan.free_per_rack.tolist())
        victims = []
        # a few jobs: Python scalars beat small-array numpy
        demand = [self._demand_l[j] for j in movers]
        best = [self._best_l[j] for j in movers]
        found: dict[tuple[int, int], np.ndarray | None] = {}  # the plan is the same for all
        for job, n, b in zip(movers, demand, best, strict=True):
            if not ((b == MACHINE and n <= fm) or (b == RACK and n <= fr)):
                continue
            key = (n, b)
            gpus = found[key] if key in found else found.setdefault(key, plan.find(n, Tier(b)))
            if gpus is not None and worth_moving(view, job, gpus, self.remaining):
                victims.append(job)
        for job in victims:
            plan.preempt(job)
            self._tier[job] = -1
        self.requeues += len(victims)
        return victims

    def _wake_at_next_timer(
        self,
        plan,
        now: float,
        starv: np.ndarray,
        t_mc: np.ndarray,
        t_rk: np.ndarray,
        since: np.ndarray,
        still: np.ndarray,
    ) -> None:
        """Ask to be called when the next waiting job's timer expires (its answer changes)."""
        if not still.any():
            return
        expiries = np.concatenate((since[still] + t_mc[still], since[still] + t_rk[still]))
        self._next_wake = wake_at_earliest(plan, expiries, now, self._next_wake)


class DallyManual(Dally):
    """Dally with fixed timers (4.3.2, 5.1.3 "Dally-manual"): 12 h machine, 24 h in total for
    rack; the same offers order and preemption as Dally."""

    name = "dally-manual"

    def __init__(
        self,
        *,
        machine_timer_s: float = MANUAL_MACHINE_TIMER_S,
        rack_timer_s: float = MANUAL_RACK_TIMER_S,
        preemption: str | bool = "requeue",
        remaining: str = "history",
    ) -> None:
        _check_time("machine_timer_s", machine_timer_s)
        _check_time("rack_timer_s", rack_timer_s)
        super().__init__(
            default_machine_timer_s=machine_timer_s,
            default_rack_timer_s=rack_timer_s,
            preemption=preemption,
            remaining=remaining,
        )
        self.params = {
            "machine_timer_s": machine_timer_s,
            "rack_timer_s": rack_timer_s,
            "preemption": self.preemption,
            "remaining": remaining,
        }

    def record(self, level: int, demand: int, now: float, starvation_s: float) -> None:
        """Fixed timers: nothing to learn."""

"""Themis: finish-time fairness with leases and auction epochs, the base scheduler of the
Cassini evaluation (Cassini thesis 4.4.2, 4.5.1).

The Themis paper (Mahajan et al., NSDI'20) is not in ../shared/papers; this follows the
thesis's description and documents what it fills in:

- **Finish-time fairness** rho = T_shared / T_ideal. T_shared = time since arrival + remaining
  iterations x the job's current iteration time (its uncontended compute time when waiting);
  T_ideal = the job's run time alone on its fair share of the cluster, 1/N of the GPUs with N
  active jobs: iterations x compute time x max(1, demand / (GPUs / N)). A larger rho is further
  from fair.
- **Leases and re-auction** (4.5.1, ``auction="reauction"``, default): "An assignment of GPU
  servers is valid until the period of lease time. When the lease time expires, the job gives
  up the server, and a new auction is conducted for all the released servers." Each job's
  lease runs ``lease_s`` (10 min, the thesis's bidding period) from its start or renewal, so
  leases are not synchronized (4.5.2). When leases expire the policy wakes up, the expired
  jobs give up their GPUs, and the released GPUs plus the free ones are auctioned to the
  expired and the waiting jobs: the arbiter serves bidders in decreasing rho ("help jobs that
  are farthest in terms of their fairness metric", 4.4.2), each on the placement with the
  smallest slowdown penalty. A job that wins its own GPUs back keeps running (renewal, no
  restart); one placed elsewhere moves (checkpoint + restore); one that wins nothing is
  preempted and waits. Running jobs whose lease has not expired are never preempted.
  Between auctions, free GPUs go to waiting jobs in decreasing rho (work conservation).
  ``auction="renew"`` is the earlier behaviour (our variant): synchronized epochs at
  multiples of ``lease_s``, at which waiting jobs preempt running jobs of lower rho and
  winners renew on the same GPUs.
- **Placement penalty** (4.4.2, ``placement="penalty"``, default): "Themis uses a slowdown
  penalty based on whether the workers are under the same rack or across racks." Themis
  sees racks, not machines: a placement inside one rack has penalty 1, one across racks
  ``cross_rack_slowdown`` (1.5; the thesis gives no value, our choice). A job gets the
  best-fit rack that holds it (fewest free GPUs, then lowest index) and the lowest-numbered
  free GPUs there, whatever machines they are on; a job that fits in no rack gets the
  lowest-numbered free GPUs anywhere (every cross-rack placement has the same penalty). The
  penalty also enters rho: T_shared counts the remaining iterations at compute time x the
  penalty of the job's placement (Themis's own estimate, not the engine's measured speed).
  ``placement="consolidated"`` is the earlier behaviour (our variant): the most consolidated
  placement (one machine, else one rack, else the fewest racks) and the measured speed.
- **Job lengths** (``lengths="known"``, default): rho reads each job's remaining iterations and
  its total, as the thesis's finish-time fairness needs (Themis's apps report their estimates;
  the engine's are exact). That is the oracle, so the default declares ``clairvoyant`` and is
  ranked apart from deployable policies. Two non-clairvoyant variants of ours estimate the
  remaining iterations with the shared estimators (``sim.estimators``):
  ``lengths="attained"``: the iterations done, and at least one lease of compute
  (``lease_s / compute``) so that a new job's estimate is not zero; ``lengths="history"``:
  the expected remaining work under the empirical distribution of the finished jobs'
  lengths (the "attained" estimate until a finished job is longer). A job's length is then
  done + that estimate. Everything else is unchanged.
- **Not modelled**: Themis's worker-count tuning. The thesis says only that "the number of
  workers is automatically tuned based on Themis's finish-time-fairness metric" with bids
  "for different GPU allocations"; the valuation and the partial-allocation arbiter are in
  the Themis paper, which is not in ../shared/papers, and the engine's jobs here have fixed
  GPU demands. Also not modelled: the fairness-knob filter that lets only the worst 1-f of
  jobs bid (every job bids).

Implementation at trace scale (``fast_paths``; per-job results bit-identical to
waking up for every expiry, checked in ``tests/test_speed_paths.py``): while no job waits, a
lease expiry in which only one-rack jobs bid is a renewal of each on its own GPUs (no
placement has a smaller penalty and the bidders' own GPUs are free), so it changes nothing
the engine sees. The policy then asks to be woken only for the first cross-rack lease end
(that auction may move the job into one rack) and, at its next call (an arrival, a finish,
or that wake-up), replays the skipped expiries at the instants it would have woken up at, so
every lease end and renewal count is the same. Cassini is not affected: it acts only when its
base starts or moves a job, and a renewal does neither (4.5.2: "Placement changes are
triggered by job arrivals, job departures, and when the lease time of any of the servers
expires"; a renewal is an expiry whose auction changes no placement). Engine events and
time-series points are fewer (``sim_events`` changes; time averages over the series agree to
rounding). The auction itself (``_auction`` with ``fast_paths``, same winners as without): the
expired jobs release their GPUs before it and it only takes GPUs, so the free count only
falls; a bidder whose demand exceeds it wins nothing, so only the bidders that fit the free
GPUs at the start are ranked (rho per job, the fair share still over all bidders) and the loop
stops once the free GPUs are below every ranked demand; an expired one-rack job whose GPUs
are still free renews without a placement search (no placement has a smaller penalty).
Per-call costs (the same floats and decisions, checked in
``tests/test_speed_paths.py``): the bidders' rho reads ``done_iters`` and the few expired
(running) bidders' ``iterations_done`` instead of ``view.live`` over every bidder, with
iterations x compute taken once per job at reset; the penalty placement scans one rack's
GPU list, not every GPU's rack; the expired jobs and the next wake-up come from one gather of
the running jobs' lease ends; deferred renewals that recur before the next call are replayed
on a heap (one operation per renewal, not a pass over every running job per instant). On ITP
cluster08 (64 GPUs, offered load 1.03) nearly every lease end is contested: 218,404
preemptions for 13,047 jobs are auction losses to waiting jobs of larger rho, not no-ops (none
is restarted at the instant it was preempted; 1.4 % restart later on the same GPUs)."""

from __future__ import annotations

import heapq
import math
from collections.abc import Sequence

import numpy as np

from dlcluster_gym.errors import ConfigError
from dlcluster_gym.scheduler import BaseScheduler
from dlcluster_gym.sim import placement
from dlcluster_gym.sim.actions import Action, Preempt, Start, WakeUp
from dlcluster_gym.sim.estimators import remaining_iterations
from dlcluster_gym.sim.view import ClusterView, Plan

from .consolidation import make_room

AUCTIONS = ("reauction", "renew")
PLACEMENTS = ("penalty", "consolidated")
LENGTHS = ("known", "attained", "history")
EPS = 1e-9
_NEAR_S = 1e-6  # one-rack lease ends this close before a cross-rack one are woken up for


class Themis(BaseScheduler):
    """Finish-time fair allocation with per-job leases and re-auctions of released GPUs."""

    name = "themis"
    # Shortcuts that give the same decisions as the general loop; False runs the
    # general loop everywhere (tests compare the two).
    fast_paths: bool = True

    def __init__(
        self,
        *,
        lease_s: float = 600.0,
        auction: str = "reauction",
        placement: str = "penalty",
        cross_rack_slowdown: float = 1.5,
        lengths: str = "known",
    ) -> None:
        if not isinstance(lease_s, int | float) or not (math.isfinite(lease_s) and lease_s > 0):
            raise ConfigError(f"lease_s must be a finite number of seconds > 0, got {lease_s!r}")
        if auction not in AUCTIONS:
            raise ConfigError(f"auction must be one of {', '.join(AUCTIONS)}, got {auction!r}")
        if placement not in PLACEMENTS:
            raise ConfigError(
                f"placement must be one of {', '.join(PLACEMENTS)}, got {placement!r}"
            )
        if not isinstance(cross_rack_slowdown, int | float) or not (
            math.isfinite(cross_rack_slowdown) and cross_rack_slowdown >= 1
        ):
            raise ConfigError(
                f"cross_rack_slowdown must be a finite number >= 1, got {cross_rack_slowdown!r}"
            )
        if lengths not in LENGTHS:
            raise ConfigError(f"lengths must be one of {', '.join(LENGTHS)}, got {lengths!r}")
        # "known": the apps report their lengths (the thesis's information model); in a
        # simulator that is the oracle, so this variant is clairvoyant.
        self.clairvoyant = lengths == "known"
        super().__init__(
            lease_s=lease_s,
            auction=auction,
            placement=placement,
            cross_rack_slowdown=cross_rack_slowdown,
            lengths=lengths,
        )
        self.lengths = lengths
        self.lease_s = float(lease_s)
        self.auction = auction
        self.placement = placement
        self.cross_rack_slowdown = float(cross_rack_slowdown)

    def reset(self, view: ClusterView, rng: np.random.Generator) -> None:
        super().reset(view, rng)
        n = view.num_job_ids
        self._demand = view.demand
        self._compute = view.compute_s
        self._arrival = view.arrival_s
        if self.lengths == "known":  # the apps' reported lengths: the oracle
            jobs = view.oracle.jobs
            self._iters = np.array([j.iterations for j in jobs], dtype=np.float64)
            # the first product of T_ideal, per job
            self._ic = self._iters * np.array([j.compute_s for j in jobs], dtype=np.float64)
        rack = view.cluster.gpu_rack
        self._rack_gpus = [np.flatnonzero(rack == r) for r in range(view.free_per_rack.size)]
        self._next_epoch = self.lease_s
        self._lease_end = np.full(n, np.inf)  # per job, while it runs (re-auction)
        self._penalty = np.ones(n)  # Themis's slowdown estimate of the job's placement
        self._cross = np.zeros(n, dtype=bool)  # the job's placement spans racks
        # Running jobs (after the last decision's actions) whose one-rack lease renewals are
        # deferred to the next call (fast paths; see ``_defer``), or None.
        self._deferred: np.ndarray | None = None
        self.renewals = 0
        self.auction_times: list[float] = []  # instants at which leases expired

    def rho(
        self,
        view: ClusterView,
        jobs: np.ndarray,
        running: np.ndarray,
        bidders: int | None = None,
    ) -> np.ndarray:
        """Finish-time fairness of ``jobs`` (``running`` flags which of them run) when
        ``bidders`` jobs (default: ``jobs.size``) share the cluster."""
        done, _, _ = view.live(jobs)
        if self.placement == "penalty":
            it = self._compute[jobs] * np.where(running, self._penalty[jobs], 1.0)
        else:
            it = np.where(running, np.asarray(view.iter_time_s)[jobs], self._compute[jobs])
            it = np.where(np.isfinite(it), it, self._compute[jobs])
        fair_share = view.num_gpus / max(jobs.size if bidders is None else bidders, 1)
        if self.lengths != "known":
            return self._rho_estimated(view, jobs, done, it, self._demand[jobs] / fair_share)
        shared = (view.now - self._arrival[jobs]) + (self._iters[jobs] - done) * it
        ideal = (
            self._iters[jobs]
            * self._compute[jobs]
            * np.maximum(1.0, self._demand[jobs] / fair_share)
        )
        return shared / ideal

    def _rho_estimated(
        self,
        view: ClusterView,
        jobs: np.ndarray,
        done: np.ndarray,
        it: np.ndarray,
        over_share: np.ndarray,
    ) -> np.ndarray:
        """rho with each job's remaining iterations estimated (``lengths`` "attained" or
        "history", our non-clairvoyant variants), its length as done + that estimate; ``it``
        is the estimated iteration time, ``over_share`` demand / fair share."""
        remaining = remaining_iterations(
            view.history, self._compute[jobs], done, method=self.lengths, floor_s=self.lease_s
        )
        shared = (view.now - self._arrival[jobs]) + remaining * it
        ideal = (done + remaining) * self._compute[jobs] * np.maximum(1.0, over_share)
        return shared / ideal

    def place(self, plan: Plan, job: int) -> np.ndarray | None:
        n = int(self._demand[job])
        if plan.num_free < n:
            return None
        if self.placement == "consolidated":
            return plan.find(n)
        return self._place_penalty(plan, n)[0]

    def _place_penalty(self, plan: Plan, n: int) -> tuple[np.ndarray, bool]:
        """``placement="penalty"`` for ``n <= plan.num_free`` GPUs: (GPUs, spans racks).
        The best-fit rack that holds ``n`` (fewest free GPUs, then the lowest index) and its
        lowest-numbered free GPUs, else the lowest-numbered free GPUs anywhere."""
        r = placement.best_fit(plan.free_per_rack, n)  # ties: the lowest rack
        if r >= 0:
            rg = self._rack_gpus[r]
            return rg[plan.free_mask[rg]][:n], False
        return np.flatnonzero(plan.free_mask)[:n], True  # no rack holds n: they span racks

    def _start(
        self, plan: Plan, job: int, gpus: np.ndarray, now: float, cross: bool | None = None
    ) -> None:
        """Start ``job`` on ``gpus`` in ``plan`` with a new lease; ``cross``: whether they
        span racks, when the caller knows."""
        plan.start(job, gpus)
        self._lease_end[job] = now + self.lease_s
        if cross is None:
            racks = plan.cluster.gpu_rack[gpus]
            cross = bool(gpus.size and racks.min() != racks.max())
        self._cross[job] = cross
        self._penalty[job] = self.cross_rack_slowdown if cross else 1.0

    def schedule(self, view: ClusterView) -> Sequence[Action]:
        if self.auction == "renew":
            return self._schedule_epochs(view)
        return self._schedule_reauction(view)

    def _schedule_reauction(self, view: ClusterView) -> Sequence[Action]:
        """Per-job leases; at expiry the released GPUs are re-auctioned (4.5.1)."""
        now = view.now
        fast = self.fast_paths
        if self._deferred is not None:
            self._catch_up(now)
        waiting = np.fromiter(view.iter_waiting(), dtype=np.int64, count=view.num_waiting)
        running = np.asarray(view.running(), dtype=np.int64)
        ends = self._lease_end[running]
        is_exp = ends <= now + EPS
        expired = running[is_exp]
        nofit = waiting.size and view.num_free < int(self._demand[waiting].min())
        if fast and not expired.size and nofit:
            waiting = waiting[:0]  # no lease expired and no waiting job fits: no auction
        if fast and expired.size and not waiting.size and self._all_one_rack(view, expired):
            self._renew_all(expired, now)
            return self._defer(running)  # nobody waits (``waiting`` is not cut down here)
        plan = view.plan()
        won = False
        if waiting.size or expired.size:
            own = {j: view.gpus_of(j) for j in expired.tolist()}
            for j in own:
                plan.preempt(j)  # gives up its servers; kept if it wins them back
            self._lease_end[expired] = np.inf  # not running unless it wins again
            kept = self._auction(view, plan, waiting, expired, own, now)
            won = bool(kept)
            if kept:  # renewals: the job keeps its GPUs, no preemption and no restart
                plan.actions = [a for a in plan.actions if getattr(a, "job", None) not in kept]
                self.renewals += len(kept)
            if expired.size:
                self.auction_times.append(now)
        if fast:
            started, preempted = self._started_preempted(plan)
            if view.num_waiting - len(started - preempted) + len(preempted - started) == 0:
                return plan.actions + self._defer(self._running_after(running, plan))
            # The earliest lease end once the actions are applied: a job whose lease had not
            # expired keeps it; a winner (started or renewed) holds one until now + lease_s.
            if expired.size:
                ends = ends[~is_exp]
            wake = float(ends.min()) if ends.size else math.inf
            if won or started:
                wake = min(wake, now + self.lease_s)
            if math.isfinite(wake):
                plan.wake_up(wake)
            return plan.actions
        after = self._running_after(running, plan)
        if after.size:
            plan.wake_up(float(self._lease_end[after].min()))
        return plan.actions

    def _auction(
        self,
        view: ClusterView,
        plan: Plan,
        waiting: np.ndarray,
        expired: np.ndarray,
        own: dict[int, np.ndarray],
        now: float,
    ) -> set[int]:
        """The auction of the released and free GPUs (4.4.2, 4.5.1): bidders (the waiting and
        the expired jobs) in decreasing rho, each on its smallest-penalty placement, an
        expired job on its own GPUs when they are free and nothing is better. Returns the
        expired jobs that won their own GPUs back (renewals).

        With ``fast_paths`` (same winners) only the bidders that can win are visited. The
        auction only takes GPUs (the expired jobs released theirs before it), so the free
        count only falls: a bidder whose demand exceeds it gets nothing (no placement exists,
        and its own GPUs, as many as its demand, cannot all be free), and once it is below
        every remaining demand nobody else wins. So only the bidders whose demand fits the
        free GPUs at the start are ranked (rho is per job; the fair share still counts every
        bidder), in the same order, and the loop stops once the free count is below the
        smallest ranked demand (the bidders left would each be skipped)."""
        kept: set[int] = set()
        if not self.fast_paths:
            ids = np.concatenate((waiting, expired))
            is_exp = np.zeros(ids.size, dtype=bool)
            is_exp[waiting.size :] = True
            rho = self.rho(view, ids, is_exp)
            for k in np.lexsort((ids, -rho)).tolist():
                self._bid(plan, int(ids[k]), own, now, kept)
            return kept
        # The expired jobs first: the order of ``ids`` does not matter (ties in rho are
        # broken by job id, not by position).
        n_exp = expired.size
        ids = np.concatenate((expired, waiting)) if n_exp else waiting
        dem = self._demand[ids]
        can = dem <= plan.num_free
        n_can = int(np.count_nonzero(can))
        if not n_can:
            return kept
        n_bidders = ids.size
        if n_can < n_bidders:
            ids, dem = ids[can], dem[can]
            n_exp = int(np.count_nonzero(can[:n_exp]))
        if n_can > 1:  # one bidder needs no ranking
            if self.placement == "penalty":
                rho = self._rho_bidders(view, ids, dem, n_exp, n_bidders)
            else:
                is_exp = np.zeros(ids.size, dtype=bool)
                is_exp[:n_exp] = True
                rho = self.rho(view, ids, is_exp, bidders=n_bidders)
            order = np.lexsort((ids, -rho))
            ids, dem = ids[order], dem[order]
        d_min = int(dem.min())
        penalty = self.placement == "penalty"
        for job, d in zip(ids.tolist(), dem.tolist(), strict=True):
            nf = plan.num_free
            if nf < d_min:
                break  # nobody else fits (the rest would be skipped one by one)
            if d <= nf:
                if penalty and job not in own:  # a waiting bidder: its best placement
                    gpus, cross = self._place_penalty(plan, d)
                    self._start(plan, job, gpus, now, cross)
                else:
                    self._bid(plan, job, own, now, kept)
        return kept

    def _rho_bidders(
        self,
        view: ClusterView,
        ids: np.ndarray,
        dem: np.ndarray,
        n_exp: int,
        bidders: int,
    ) -> np.ndarray:
        """``rho(view, ids, running, bidders)`` for ``placement="penalty"`` in the auction,
        where the first ``n_exp`` jobs (the expired bidders, a few) are exactly the running
        ones and ``dem`` is ``ids``'s demands: the same float operations in the same order,
        without computing
        ``view.live``'s run and attained columns for every bidder (a waiting job's
        iterations done are ``done_iters``; a running one's are ``iterations_done``, the
        scalar form of ``live``), and with ``iterations x compute`` taken once per job."""
        done = view.done_iters[ids]
        it = self._compute[ids]
        for k, j in enumerate(ids[:n_exp].tolist()):
            done[k] = view.iterations_done(j)
            it[k] = it[k] * self._penalty[j]  # compute x penalty; x 1.0 for waiting jobs
        fair_share = view.num_gpus / max(bidders, 1)
        if self.lengths != "known":
            return self._rho_estimated(view, ids, done, it, dem / fair_share)
        shared = (view.now - self._arrival[ids]) + (self._iters[ids] - done) * it
        return shared / (self._ic[ids] * np.maximum(1.0, dem / fair_share))

    def _bid(
        self, plan: Plan, job: int, own: dict[int, np.ndarray], now: float, kept: set[int]
    ) -> None:
        """One bidder's turn in the auction: its smallest-penalty placement, or its own GPUs
        (an expired job) when they are free and no placement has a smaller penalty."""
        mine = own.get(job)
        if self.fast_paths and mine is not None and plan.free_mask[mine].all():
            racks = plan.cluster.gpu_rack[mine]
            if racks.min() == racks.max():  # one rack: no placement has a smaller penalty
                kept.add(job)
                self._start(plan, job, mine, now, cross=False)
                return
        gpus = self.place(plan, job)
        if (
            mine is not None
            and plan.free_mask[mine].all()
            and (gpus is None or self._no_better(plan, mine, gpus))
        ):
            gpus = mine
        if gpus is None:
            return
        if mine is not None and np.array_equal(np.sort(gpus), np.sort(mine)):
            kept.add(job)
        self._start(plan, job, gpus, now)

    @staticmethod
    def _all_one_rack(view: ClusterView, jobs: np.ndarray) -> bool:
        """Whether each of ``jobs`` runs inside one rack."""
        rack = view.cluster.gpu_rack
        for j in jobs.tolist():
            r = rack[view.gpus_of(j)]
            if r.min() != r.max():
                return False
        return True

    def _renew_all(self, expired: np.ndarray, now: float) -> None:
        """The auction (4.5.1) when only jobs whose leases expired bid and each holds one
        rack: each bidder finds its own GPUs free (the bidders before it kept theirs) and no
        placement with a smaller penalty exists, so every bidder renews on its own GPUs,
        exactly as the general loop decides, without placing or ordering anything."""
        self._lease_end[expired] = now + self.lease_s
        self._penalty[expired] = 1.0
        self.renewals += int(expired.size)
        self.auction_times.append(now)

    @staticmethod
    def _started_preempted(plan: Plan) -> tuple[set[int], set[int]]:
        """The jobs ``plan`` starts and the jobs it preempts."""
        started: set[int] = set()
        preempted: set[int] = set()
        for a in plan.actions:
            if isinstance(a, Start):
                started.add(a.job)
            elif isinstance(a, Preempt):
                preempted.add(a.job)
        return started, preempted

    def _defer(self, after: np.ndarray) -> list[Action]:
        """The wake-up to ask for when no job waits, with ``after`` the jobs that run once
        this decision's actions are applied.

        With nobody waiting, a lease expiry in which only one-rack jobs bid is a renewal of
        each on its own GPUs (``_renew_all``): it changes no placement, so the policy need not
        wake up for it. It wakes up for the first cross-rack lease end instead (that auction
        may move the job into one rack), or for any earlier event (an arrival, a finish).
        ``_catch_up`` then replays the skipped expiries in order, at the instants the policy
        would have woken up at, so every lease end is what waking up for each would give.
        One-rack leases ending within ``_NEAR_S`` before the first cross-rack one are woken
        up for (an expiry within ``EPS`` of another is decided with it).
        """
        self._deferred = after
        if not after.size:
            return []
        ends = self._lease_end[after]
        cross = self._cross[after]
        if not cross.any():
            return []
        first = float(ends[cross].min())
        near = ends[~cross & (ends >= first - _NEAR_S)]
        return [WakeUp(min(first, float(near.min())) if near.size else first)]

    def _catch_up(self, now: float) -> None:
        """Replay the one-rack renewals skipped since the last call (``_defer``): at each
        instant the policy would have woken up at (the earliest lease end of the jobs then
        running), strictly before ``now``, every lease ending within ``EPS`` renews from that
        instant, as ``_renew_all`` does. Nothing else changed in between: no job waited, and
        the jobs running were those of the last decision (a finish or an arrival is a call)."""
        jobs, self._deferred = self._deferred, None
        if jobs is None or not jobs.size:
            return
        ends = self._lease_end[jobs]
        first = float(ends.min())
        if first >= now:
            return  # no lease ended since the last call
        cross = self._cross[jobs]
        if first + self.lease_s >= now:
            # No renewal ends before ``now``: each lease renews at most once, at the first
            # wake-up instant that covers it, so the instants are the sorted lease ends
            # grouped ``EPS`` apart (what the general replay below gives, in one pass).
            order = np.argsort(ends, kind="stable")
            se = ends[order]
            out = se.copy()
            i, due = 0, int(np.searchsorted(se, now, side="left"))
            while i < due:
                w = float(se[i])
                j = int(np.searchsorted(se, w + EPS, side="right"))
                out[i:j] = w + self.lease_s
                self.renewals += j - i
                self.auction_times.append(w)
                i = j
            if i and cross[order[:i]].any():  # _defer wakes up before this can happen
                raise RuntimeError("themis: deferred renewal of a cross-rack lease")
            ends[order] = out
            self._lease_end[jobs] = ends
            return
        # Leases renew more than once before ``now``: replay instant by instant on a heap of
        # (lease end, position), each instant the smallest end w, every end <= w + EPS
        # renewing to w + lease_s (one heap operation per renewal, not a pass over every
        # job per instant).
        heap = list(zip(ends.tolist(), range(ends.size), strict=True))
        heapq.heapify(heap)
        lease_s, renewed = self.lease_s, 0
        w = heap[0][0]
        while w < now:
            lim, new = w + EPS, w + lease_s
            group = []
            while heap and heap[0][0] <= lim:
                group.append(heapq.heappop(heap)[1])
            if cross[group].any():  # _defer wakes up before this can happen
                raise RuntimeError(f"themis: deferred renewal of a cross-rack lease at t={w}")
            for k in group:
                heapq.heappush(heap, (new, k))
            renewed += len(group)
            self.auction_times.append(w)
            w = heap[0][0]
        self.renewals += renewed
        for end, k in heap:
            ends[k] = end
        self._lease_end[jobs] = ends

    def _no_better(self, plan: Plan, mine: np.ndarray, other: np.ndarray) -> bool:
        """Whether ``other`` has no smaller penalty than the job's own GPUs ``mine``."""
        rm, ro = plan.cluster.gpu_rack[mine], plan.cluster.gpu_rack[other]
        return bool(rm.min() == rm.max() or ro.min() != ro.max())

    @staticmethod
    def _running_after(running: np.ndarray, plan: Plan) -> np.ndarray:
        """Jobs that run once ``plan``'s actions are applied."""
        gone = [a.job for a in plan.actions if isinstance(a, Preempt)]
        new = [a.job for a in plan.actions if isinstance(a, Start)]
        if gone:
            running = running[~np.isin(running, gone)]
        return np.union1d(running, np.asarray(new, dtype=np.int64))  # sorted, unique

    def _schedule_epochs(self, view: ClusterView) -> Sequence[Action]:
        """``auction="renew"``: synchronized epochs; winners renew on the same GPUs."""
        now = view.now
        epoch = now >= self._next_epoch
        waiting = np.fromiter(view.iter_waiting(), dtype=np.int64, count=view.num_waiting)
        running = np.asarray(view.running(), dtype=np.int64)
        plan = view.plan()
        if epoch:
            self._next_epoch = (math.floor(now / self.lease_s) + 1) * self.lease_s
        if waiting.size and (plan.num_free or (epoch and running.size)):
            ids = np.concatenate((waiting, running))
            is_run = np.zeros(ids.size, dtype=bool)
            is_run[waiting.size :] = True
            rho = self.rho(view, ids, is_run)
            rho_w, rho_r = rho[: waiting.size], rho[waiting.size :]
            vorder = np.lexsort((running, rho_r))  # lowest rho first: the first to lose
            victims, victim_rho = running[vorder], rho_r[vorder]
            victim_open = np.ones(victims.size, dtype=bool)
            for k in np.lexsort((waiting, -rho_w)).tolist():
                job = int(waiting[k])
                gpus = self.place(plan, job)
                if gpus is None and epoch:
                    lower = victim_open & (victim_rho < rho_w[k])
                    plan, gpus = make_room(
                        plan,
                        lambda p, j=job: self.place(p, j),
                        int(self._demand[job]),
                        victims,
                        self._demand[victims],
                        lower,
                    )
                    victim_open &= ~(victim_rho < rho_w[k]) | lower
                if gpus is not None:
                    self._start(plan, job, gpus, now)
        if running.size or plan.actions:  # leases to renew; nothing to renew once idle
            plan.wake_up(self._next_epoch)
        return plan.actions

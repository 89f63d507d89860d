"""Observations of ``DLCluster/Scheduler-v0``: padded, masked slots of waiting and running jobs
plus cluster features, all in [0, 1], vectorized over slots (numpy, no per-job Python loops
except a per-job cache of model sensitivities).

Future information is hidden by default: a job's total iterations (its duration, progress
and remaining work) are unknown; what it has attained so far (GPU-seconds, iterations done,
time held) is known, as a real scheduler would see it. ``known_durations=True`` fills the
``remaining_*`` features for oracle studies.
"""

from __future__ import annotations

import math
from collections.abc import Callable

import numpy as np

from dlcluster_gym import numerics
from dlcluster_gym.cluster.topology import Tier
from dlcluster_gym.envs.features import (
    CLUSTER_FEATURES,
    COUNT_REF,
    HOUR,
    count_feature,
    done_share,
)
from dlcluster_gym.envs.placement import network_sensitivity
from dlcluster_gym.perf import estimate_kernel, slot_kernel
from dlcluster_gym.sim import estimators
from dlcluster_gym.sim.estimators import KEY_LEVELS, KEY_WINDOW, keyed_length, keyed_remaining_work
from dlcluster_gym.sim.offers import ACTION_NAMES, NUM_CANDIDATES
from dlcluster_gym.sim.view import ClusterView, Plan

WAITING_FEATURES: tuple[str, ...] = (
    "valid",  # 1 for a filled slot
    "demand",  # log2(GPUs) / 8
    "fits_machine",  # 1 if the job fits on one machine of this cluster
    "fits_rack",  # 1 if it fits in one rack
    "sens_machine",  # exposed comm / compute of its model at each tier, f / (1 + f)
    "sens_rack",
    "sens_network",
    "starvation",  # time since it entered the wait queue (log scale, 1 = a week)
    "age",  # time since it arrived (log scale)
    "attained",  # GPU-hours of service so far, log1p(h) / log1p(10^4)
    "nw_sens",  # Dally's Nw_sens: ideal compute time of the work done / time held (1: new)
    "preemptions",  # min(preemptions / 10, 1)
    "high_skew",  # 1 if Tiresias calls its model high-skew
    *(f"cand_{n}" for n in ACTION_NAMES[1:]),  # 1 if that candidate placement exists now
    "remaining_work",  # known_durations only: remaining ideal GPU-hours (log scale), else 0
    "remaining_time",  # known_durations only: remaining ideal hours alone (log scale), else 0
)
RUNNING_FEATURES: tuple[str, ...] = (
    "valid",
    "demand",
    "tier_machine",  # one-hot tier of its placement
    "tier_rack",
    "tier_network",
    "wider_than_best",  # 1 if placed at a wider tier than the cluster allows it
    "comm",  # exposed comm / compute on its placement, f / (1 + f)
    "attained",
    "running_for",  # time since its last start (log scale)
    "nw_sens",
    "preemptions",
    *(f"move_{n}" for n in ACTION_NAMES[1:]),  # 1 if it could move there (preemption on)
    "remaining_work",  # known_durations only
    "remaining_time",
)
GLOBAL_FEATURES: tuple[str, ...] = (
    *CLUSTER_FEATURES,
    "hidden_waiting",  # waiting jobs not in a slot (log-scaled count)
    "hidden_demand",  # their GPUs / cluster GPUs (capped at 1)
    "hidden_max_starvation",  # the longest wait among them (log scale)
    "decisions_now",  # decisions already taken at this instant (log-scaled count)
)
HISTORY_FEATURES: tuple[str, ...] = (
    "est_remaining",  # keyed estimate of remaining GPU-hours (log scale; LAS's where unknown)
    "est_known",  # 1 if that estimate comes from finished jobs of its keys, else 0
    "est_length",  # its expected length at submission, ideal hours alone (log scale)
    "est_specific",  # the key behind the length: 1 user+name, .75 VC+GPUs, .5 VC, .25 all, 0 none
    "est_support",  # finished jobs behind it / the key window (20)
    "vc_running",  # GPUs its virtual cluster holds now / cluster GPUs (0 without VCs)
    "vc_waiting",  # GPUs its virtual cluster's waiting jobs want / cluster GPUs
)
"""Appended to the waiting and running slot features with ``history_features=True``
(Scheduler-v4): the submission attributes' signal (``sim.estimators``'s keyed estimates,
from finished jobs only) and the job's virtual cluster's share of the cluster."""
NW, NR, NG = len(WAITING_FEATURES), len(RUNNING_FEATURES), len(GLOBAL_FEATURES)
NH = len(HISTORY_FEATURES)
_W = {k: i for i, k in enumerate(WAITING_FEATURES)}
_R = {k: i for i, k in enumerate(RUNNING_FEATURES)}
_W_KERNEL_COLS = np.array([_W[k] for k in (
    "valid", "demand", "starvation", "age", "attained", "nw_sens", "preemptions", "high_skew",
    "remaining_work", "remaining_time",
)], dtype=np.int64)  # fmt: skip
_R_KERNEL_COLS = np.array([_R[k] for k in (
    "valid", "demand", "tier_machine", "wider_than_best", "comm", "attained", "running_for",
    "nw_sens", "preemptions", "remaining_work", "remaining_time",
)], dtype=np.int64)  # fmt: skip
"""The columns ``perf.slot_kernel``'s rows fill, in its order (it writes ``preemptions`` and
``remaining_time`` one past ``nw_sens`` and ``remaining_work``, as both row kinds have them)."""
_LOG_T = math.log1p(168.0)
_LOG_WORK = math.log1p(1e4)
MACHINE_FEATURES: tuple[str, ...] = ("valid", "free", "gpus", "rack")
RACK_FEATURES: tuple[str, ...] = ("valid", "free", "max_free_machine", "empty_machines")
# observation="graph": the network as edges of the cluster tree (machine -> its rack's ToR
# over the machine's NICs; rack -> spine over the rack's uplinks) and the spine
MACHINE_LINK_FEATURES: tuple[str, ...] = (
    "valid",
    "nic_bandwidth",  # NIC Gb/s per GPU / the rack tier's per-GPU Gb/s (capped at 1)
    "nics",  # NICs / the most NICs of any machine
    "nic_load",  # busiest NIC: time-averaged carried demand / capacity (0: sharing off)
    "nic_contended",  # 1 if a NIC of the machine is over-subscribed (stretches jobs)
)
RACK_LINK_FEATURES: tuple[str, ...] = (
    "valid",
    "uplink_bandwidth",  # summed uplinks / summed NICs below them (1 / ToR oversubscription)
    "uplink_load",  # busiest uplink (rail) of the rack, as nic_load
    "uplink_contended",
)
SPINE_FEATURES: tuple[str, ...] = (
    "present",  # 1 if the cluster models a spine link (spine oversubscription > 1)
    "bandwidth",  # spine / summed uplinks (1 / spine oversubscription)
    "load",
    "contended",
)


def _logt(seconds: np.ndarray) -> np.ndarray:
    return np.minimum(numerics.log1p(np.maximum(seconds, 0.0) / HOUR) / _LOG_T, 1.0)


def _logw(gpu_seconds: np.ndarray) -> np.ndarray:
    return np.minimum(numerics.log1p(np.maximum(gpu_seconds, 0.0) / HOUR) / _LOG_WORK, 1.0)


class QueueObserver:
    """Per-run constants and the feature arrays of one Scheduler-v0 episode."""

    cache_history = True
    """Reuse a job's history estimates until a job finishes or its work done changes (off:
    recompute them at every step; the observations are the same, tested)."""
    cache_rows = True
    """Reuse a job's slot row between the steps of one decision instant (off: recompute the
    rows at every step; the observations are the same, tested)."""
    compiled_rows = True
    """Compute the slot rows with ``perf.slot_kernel`` where numba is present (off: the numpy
    form; the observations are the same, tested)."""

    def __init__(
        self,
        view: ClusterView,
        known_durations: bool,
        done_of: str = "arrived",
        history_features: bool = False,
    ) -> None:
        c = view.cluster
        e = view._e
        self.view, self.engine, self.cluster = view, e, c
        self.known = known_durations
        self.done_of = done_of
        # Per-run constant tables over the engine's job list (the simulator side; features
        # read them for arrived jobs only). Job lengths only with known_durations.
        jobs = e.jobs
        self.demand = np.array([j.num_gpus for j in jobs], dtype=np.int64)
        self.compute = np.array([j.compute_s for j in jobs], dtype=np.float64)
        self.iters: np.ndarray | None = (
            np.array([j.iterations for j in jobs], dtype=np.float64) if known_durations else None
        )
        self.arrival = np.array([j.arrival_s for j in jobs], dtype=np.float64)
        profiles = [e.profile(j.job_id) for j in jobs]  # the scenario's profile source
        self.skew = np.array([p.skew == "high" for p in profiles], dtype=np.float32)
        d = self.demand
        self.f_demand = np.minimum(numerics.log2(np.maximum(d, 1)) / 8.0, 1.0).astype(np.float32)
        self.f_machine = (d <= c.max_gpus_per_machine).astype(np.float32)
        self.f_rack = (d <= c.max_gpus_per_rack).astype(np.float32)
        self.best = np.where(
            d <= c.max_gpus_per_machine,
            int(Tier.MACHINE),
            np.where(d <= c.max_gpus_per_rack, int(Tier.RACK), int(Tier.NETWORK)),
        ).astype(np.int8)
        ideal = e.scenario.network == "ideal"
        cache: dict[tuple[str, int, str | None], tuple[float, float, float]] = {}
        sens = np.zeros((len(jobs), 3), dtype=np.float32)
        for i, (j, p) in enumerate(zip(jobs, profiles, strict=True)):
            key = (j.model, j.num_gpus, j.gpu_type)
            if key not in cache:
                cache[key] = network_sensitivity(c, p, j.num_gpus, j.gpu_type, ideal)
            sens[i] = cache[key]
        self.sens = sens
        # per-job constant features, gathered in one indexing per step
        self.static_w = np.zeros((len(jobs), 6), dtype=np.float32)
        self.static_w[:, 0] = self.f_demand
        self.static_w[:, 1] = self.f_machine
        self.static_w[:, 2] = self.f_rack
        self.static_w[:, 3:6] = sens
        self.tier = np.full(len(jobs), -1, dtype=np.int8)  # tier of a running job's placement
        self.num_gpus = float(c.num_gpus)
        self.num_jobs = max(len(jobs), 1)
        self.machine_gpus = c.machine_num_gpus
        self.rack_gpus = c.rack_num_gpus
        self.history_features = history_features
        vcs = sorted({j.vc for j in jobs if j.vc})
        code = {v: i + 1 for i, v in enumerate(vcs)}  # 0: no VC
        self.vc = np.array([code.get(j.vc, 0) for j in jobs], dtype=np.int64)
        self.num_vcs = len(vcs) + 1
        # the history columns of each job as last computed, and what they were computed
        # from (finished jobs so far, iterations done, attained GPU-seconds): a waiting job's
        # row changes only when a job finishes, so most rows are reused from step to step
        self._h_rows = np.zeros((len(jobs), NH - 2), dtype=np.float32)
        self._h_count = np.full(len(jobs), -1, dtype=np.int64)
        self._h_done = np.full(len(jobs), np.nan)
        self._h_att = np.full(len(jobs), np.nan)
        # each job's waiting and running row as computed at the instant ``_at_*`` names:
        # within one decision instant the engine's counters do not move, so a job's row
        # (all but its candidate/move columns) is the same at every step of that instant
        self.instant = 0
        self._units = np.array([HOUR, _LOG_T, _LOG_WORK])
        self._sizes = np.array([c.num_gpus, c.max_gpus_per_machine, c.max_gpus_per_rack,
                                len(CLUSTER_FEATURES)], dtype=np.int64)  # fmt: skip
        self._no_iters = np.zeros(0)
        nh = NH if history_features else 0
        self._w_rows = np.zeros((len(jobs), NW + nh), dtype=np.float32)
        self._r_rows = np.zeros((len(jobs), NR + nh), dtype=np.float32)
        self._w_at = np.full(len(jobs), -1, dtype=np.int64)
        self._r_at = np.full(len(jobs), -1, dtype=np.int64)

    def new_instant(self) -> None:
        """A new decision instant: the engine's state may have moved (rows are recomputed)."""
        self.instant += 1

    def _rows(self, ids: np.ndarray, out: np.ndarray, table: np.ndarray, at: np.ndarray,
              fill: Callable[[np.ndarray, np.ndarray], None]) -> None:  # fmt: skip
        """``out[:] = `` the rows of ``ids``, filling (``fill(missing, rows)``) only those not
        yet computed at this instant (``cache_rows``; else all of them)."""
        if not self.cache_rows:
            fill(ids, out)
            return
        miss = ids[at[ids] != self.instant]
        if miss.size:
            rows = np.zeros((miss.size, table.shape[1]), dtype=np.float32)
            fill(miss, rows)
            table[miss] = rows
            at[miss] = self.instant
        out[:] = table[ids]

    def history_block(self, ids: np.ndarray, out: np.ndarray, done: np.ndarray,
                      att: np.ndarray) -> None:  # fmt: skip
        """Fill ``out`` (len(ids), NH) with ``HISTORY_FEATURES`` of ``ids`` (their iterations
        ``done`` and attained GPU-seconds ``att`` as of now)."""
        if ids.size == 0:
            return
        h = self.view.history
        count_now = h.count
        if estimators.use_kernel and estimate_kernel.history_block is not None:
            ring, keys = h.key_table(ids)
            estimate_kernel.history_block(
                ring, keys, ids, done, att, self.compute, self.demand, count_now,
                self.cache_history, self._h_count, self._h_done, self._h_att, self._h_rows,
                self._units, KEY_WINDOW, out,
            )  # fmt: skip
        else:
            if self.cache_history:
                new_history = self._h_count[ids] != count_now
                stale = new_history | (self._h_done[ids] != done) | (self._h_att[ids] != att)
            else:
                new_history = stale = np.ones(ids.size, dtype=bool)
            if stale.any():
                self._history_rows(ids[stale], done[stale], att[stale], new_history[stale])
                self._h_count[ids[stale]] = count_now
            out[:, :5] = self._h_rows[ids]
        vc = self.vc[ids]
        if self.num_vcs > 1:
            e = self.engine
            run = np.fromiter(e.running, dtype=np.int64, count=len(e.running))
            wait = np.fromiter(e.waiting, dtype=np.int64, count=len(e.waiting))
            held = np.bincount(self.vc[run], weights=self.demand[run], minlength=self.num_vcs)
            want = np.bincount(self.vc[wait], weights=self.demand[wait], minlength=self.num_vcs)
            out[:, 5] = np.where(vc > 0, np.minimum(held[vc] / self.num_gpus, 1.0), 0.0)
            out[:, 6] = np.where(vc > 0, np.minimum(want[vc] / self.num_gpus, 1.0), 0.0)
        else:
            out[:, 5:7] = 0.0

    def _history_rows(
        self, ids: np.ndarray, done: np.ndarray, att: np.ndarray, new_history: np.ndarray
    ) -> None:
        """Compute the estimate columns of ``HISTORY_FEATURES`` of ``ids`` into the cache
        (the numpy form of ``perf.estimate_kernel.history_block``): the remaining-work
        estimate of every one of them (its work done changed, or the history did), the
        expected length and its key of those where the history changed."""
        h = self.view.history
        compute, g = self.compute[ids], self.demand[ids].astype(np.float64)
        rows = self._h_rows
        rem, _ = keyed_remaining_work(h, ids, done * compute)
        known = ~np.isnan(rem)
        rows[ids, 0] = _logw(np.where(known, rem * g, att))
        rows[ids, 1] = known
        if new_history.any():
            fresh = ids[new_history]
            length, count, level = keyed_length(h, fresh)
            none = np.isnan(length)
            rows[fresh, 2] = np.where(none, 0.0, _logt(np.where(none, 0.0, length)))
            top = len(KEY_LEVELS) + 1
            rows[fresh, 3] = np.where(level < top, (top - level) / top, 0.0)
            rows[fresh, 4] = count / KEY_WINDOW
        self._h_done[ids] = done
        self._h_att[ids] = att

    def note_placement(self, job: int, gpus: np.ndarray) -> None:
        """Remember the tier of a job's new placement (a start or a move)."""
        self.tier[job] = int(self.cluster.placement_tier(gpus))

    # ------------------------------------------------------------------ slots
    def waiting_block(
        self, ids: np.ndarray, cand: np.ndarray, out: np.ndarray, now: float,
        requeued: np.ndarray | None = None,
    ) -> None:  # fmt: skip
        """Fill ``out`` (K, NW) for the waiting jobs ``ids`` (first rows) with candidate
        masks ``cand`` (len(ids), 6). ``requeued`` marks the jobs preempted at this instant
        (Scheduler-v0's ``requeue``): still running in the engine, so their counters are
        brought up to now and their starvation is 0."""
        out[:] = 0.0
        k = ids.size
        if k == 0:
            return
        if requeued is None:
            self._rows(ids, out[:k], self._w_rows, self._w_at,
                       lambda i, rows: self._waiting_rows(i, rows, now, None))  # fmt: skip
        else:  # requeued rows are brought up to now: not this instant's cached rows
            self._waiting_rows(ids, out[:k], now, requeued)
        c0 = _W[f"cand_{ACTION_NAMES[1]}"]
        out[:k, c0 : c0 + NUM_CANDIDATES] = cand

    def _waiting_rows(self, ids: np.ndarray, rows: np.ndarray, now: float,
                      requeued: np.ndarray | None) -> None:  # fmt: skip
        """``waiting_block``'s rows of ``ids`` (zeroed ``rows``), candidate columns left 0."""
        k = ids.size
        e = self.engine
        if requeued is None and self.compiled_rows and slot_kernel.waiting_rows is not None:
            slot_kernel.waiting_rows(
                ids, e.wait_since, e.attained, e.done_iters, e.run_s, e.preemptions,
                self.arrival, self.compute, self.static_w, self.skew,
                self._no_iters if self.iters is None else self.iters, self.demand, float(now),
                self._units, _W_KERNEL_COLS, rows,
            )  # fmt: skip
            if self.history_features:
                self.history_block(ids, rows[:, NW:], e.done_iters[ids], e.attained[ids])
            return
        rows[:, _W["valid"]] = 1.0
        rows[:, _W["demand"] : _W["sens_network"] + 1] = self.static_w[ids]
        since = e.wait_since[ids]
        att = e.attained[ids]  # waiting jobs' counters are current
        done, run = e.done_iters[ids], e.run_s[ids]
        if requeued is not None:
            since, att, done, run = since.copy(), att.copy(), done.copy(), run.copy()
            since[requeued] = now
            done[requeued], run[requeued], att[requeued] = self.view.live(ids[requeued])
        rows[:, _W["starvation"]] = _logt(now - since)
        rows[:, _W["age"]] = _logt(now - self.arrival[ids])
        rows[:, _W["attained"]] = _logw(att)
        nws = np.ones(k)
        ran = run > 0
        nws[ran] = np.minimum(done[ran] * self.compute[ids[ran]] / run[ran], 1.0)
        rows[:, _W["nw_sens"]] = nws
        rows[:, _W["preemptions"]] = np.minimum(e.preemptions[ids] / 10.0, 1.0)
        rows[:, _W["high_skew"]] = self.skew[ids]
        if self.iters is not None:
            left = np.maximum(self.iters[ids] - done, 0.0) * self.compute[ids]
            rows[:, _W["remaining_work"]] = _logw(left * self.demand[ids])
            rows[:, _W["remaining_time"]] = _logt(left)
        if self.history_features:
            self.history_block(ids, rows[:, NW:], done, att)

    def running_block(self, ids: np.ndarray, move: np.ndarray, out: np.ndarray, now: float) -> None:
        """Fill ``out`` (R, NR) for the running jobs ``ids`` with move masks ``move``."""
        out[:] = 0.0
        k = ids.size
        if k == 0:
            return
        self._rows(ids, out[:k], self._r_rows, self._r_at,
                   lambda i, rows: self._running_rows(i, rows, now))  # fmt: skip
        m0 = _R[f"move_{ACTION_NAMES[1]}"]
        out[:k, m0 : m0 + NUM_CANDIDATES] = move

    def _running_rows(self, ids: np.ndarray, rows: np.ndarray, now: float) -> None:
        """``running_block``'s rows of ``ids`` (zeroed ``rows``), move columns left 0."""
        k = ids.size
        e = self.engine
        if self.compiled_rows and slot_kernel.running_rows is not None:
            done, run, att = self.view.live(ids)  # running jobs' counters, brought up to now
            slot_kernel.running_rows(
                ids, done, run, att, self.f_demand, self.tier, self.best, e.compute_per_iter,
                e.comm_per_iter, e.last_start, e.preemptions, self.compute,
                self._no_iters if self.iters is None else self.iters, self.demand, float(now),
                self._units, _R_KERNEL_COLS, rows,
            )  # fmt: skip
            if self.history_features:
                self.history_block(ids, rows[:, NR:], done, att)
            return
        rows[:, _R["valid"]] = 1.0
        rows[:, _R["demand"]] = self.f_demand[ids]
        tier = self.tier[ids]
        rows[np.arange(k), _R["tier_machine"] + np.maximum(tier, 0)] = 1.0
        rows[:, _R["wider_than_best"]] = tier > self.best[ids]
        cpi = e.compute_per_iter[ids]
        f = np.where(cpi > 0, e.comm_per_iter[ids] / np.where(cpi > 0, cpi, 1.0), 0.0)
        rows[:, _R["comm"]] = f / (1.0 + f)
        done, run, att = self.view.live(ids)  # running jobs' counters, brought up to now
        rows[:, _R["attained"]] = _logw(att)
        rows[:, _R["running_for"]] = _logt(now - e.last_start[ids])
        nws = np.ones(k)
        ran = run > 0
        nws[ran] = np.minimum(done[ran] * self.compute[ids[ran]] / run[ran], 1.0)
        rows[:, _R["nw_sens"]] = nws
        rows[:, _R["preemptions"]] = np.minimum(e.preemptions[ids] / 10.0, 1.0)
        if self.iters is not None:
            left = np.maximum(self.iters[ids] - done, 0.0) * self.compute[ids]
            rows[:, _R["remaining_work"]] = _logw(left * self.demand[ids])
            rows[:, _R["remaining_time"]] = _logt(left)
        if self.history_features:
            self.history_block(ids, rows[:, NR:], done, att)

    def global_block(
        self, out: np.ndarray, plan: Plan, slots: np.ndarray, hidden: np.ndarray,
        n_running: int, now: float, decisions: int,
    ) -> None:  # fmt: skip
        """``CLUSTER_FEATURES`` of the plan (the GPUs taken by this instant's decisions
        count as busy; waiting = the jobs still startable now), then what the slots leave
        out."""
        c = self.cluster
        e = self.engine  # arrived jobs from the engine's state (this instant's plan moves none)
        done = done_share(e.n_done, len(e.waiting), len(e.running), self.num_jobs, self.done_of)
        if self.compiled_rows and slot_kernel.global_rows is not None:
            slot_kernel.global_rows(
                plan.free_per_machine, plan.free_per_rack, self.machine_gpus, self.rack_gpus,
                self._sizes, self.demand, slots, hidden, e.wait_since,
                np.array([n_running, decisions], dtype=np.int64), float(now), done,
                self._units, math.log1p(COUNT_REF), out,
            )  # fmt: skip
            return
        fpm, fpr = plan.free_per_machine, plan.free_per_rack
        free = float(fpr.sum())
        empty_m = fpm == self.machine_gpus
        ng = self.num_gpus
        out[0] = free / ng
        out[1] = fpm.max() / c.max_gpus_per_machine
        out[2] = fpr.max() / c.max_gpus_per_rack
        out[3] = empty_m.sum() / fpm.size
        out[4] = (fpr == self.rack_gpus).sum() / fpr.size
        out[5] = 1.0 - float(self.machine_gpus[empty_m].sum()) / free if free > 0 else 0.0
        n_wait = slots.size + hidden.size
        out[6] = count_feature(n_wait)
        d = self.demand
        out[7] = min(float(d[slots].sum() + d[hidden].sum()) / ng, 1.0) if n_wait else 0.0
        out[8] = count_feature(n_running)
        out[9] = done
        n = len(CLUSTER_FEATURES)
        out[n] = count_feature(hidden.size)
        if hidden.size:
            out[n + 1] = min(float(d[hidden].sum()) / ng, 1.0)
            wait = float(now - self.engine.wait_since[hidden].min())
            out[n + 2] = min(math.log1p(max(wait, 0.0) / HOUR) / _LOG_T, 1.0)  # _logt of one
        else:
            out[n + 1] = out[n + 2] = 0.0
        out[n + 3] = count_feature(decisions)

    def graph_block(self, running: np.ndarray, out: dict[str, np.ndarray]) -> None:
        """The ``observation="graph"`` entries (``out``: zeroed arrays, filled here): job ->
        machine edges of the running slots ``running``, the machine -> rack edge index, and
        the link features of the cluster tree's edges (``MACHINE_LINK_FEATURES``,
        ``RACK_LINK_FEATURES``, ``SPINE_FEATURES``). Loads and contention are the engine's
        now (the starts planned at this instant join the links when the agent stops)."""
        c, e = self.cluster, self.engine
        nm, nr = c.num_machines, c.num_racks
        if running.size:
            gpus = [e.job_gpus[job] for job in running.tolist()]
            slot = np.repeat(np.arange(running.size), [g.size for g in gpus])
            machine = c.gpu_machine[np.concatenate(gpus)]
            held = np.bincount(slot * nm + machine, minlength=running.size * nm)
            out["running_machines"][: running.size, :nm] = (
                held.reshape(running.size, nm) / self.machine_gpus
            )
        out["machine_rack"][:nm] = c.machine_rack
        out["machine_rack"][nm:] = -1
        g = self._graph_static()
        ml, rl, sp = out["machine_links"], out["rack_links"], out["spine"]
        ml[:nm, :3] = g["machine"]
        rl[:nr, :2] = g["rack"]
        sp[:2] = g["spine"]
        if e.links is None:  # sharing off (or cannot bind): no loads
            return
        load = np.minimum(e.link_load_ratio(), 1.0)
        hot = np.zeros(c.num_links, dtype=bool)
        hot[e.contended_links()] = True
        nics = np.arange(c.num_nics)
        np.maximum.at(ml[:, 3], c.nic_machine, load[nics].astype(np.float32))
        np.maximum.at(ml[:, 4], c.nic_machine, hot[nics].astype(np.float32))
        up = np.arange(c.num_nics, c.num_nics + nr * c.num_rails)
        rack_of_up = (up - c.num_nics) // c.num_rails
        np.maximum.at(rl[:, 2], rack_of_up, load[up].astype(np.float32))
        np.maximum.at(rl[:, 3], rack_of_up, hot[up].astype(np.float32))
        if c.spine_link >= 0:
            sp[2] = load[c.spine_link]
            sp[3] = float(hot[c.spine_link])

    def _graph_static(self) -> dict[str, np.ndarray]:
        """The constant link features of ``graph_block`` (computed once per episode)."""
        got = self.__dict__.get("_graph")
        if got is None:
            c = self.cluster
            nr = c.num_racks
            per_gpu = c.machine_nic_total_Bps / np.maximum(c.machine_num_gpus, 1)
            tier = c.rack_link.bandwidth_Bps
            machine = np.stack(
                (np.ones(c.num_machines), np.minimum(per_gpu / tier, 1.0),
                 c.machine_num_nics / c.machine_num_nics.max()), axis=1,
            )  # fmt: skip
            caps = c.link_capacity_Bps
            up_cap = caps[c.num_nics : c.num_nics + nr * c.num_rails].reshape(nr, c.num_rails)
            below = np.bincount(c.machine_rack[c.nic_machine], weights=c.nic_Bps, minlength=nr)
            rack = np.stack((np.ones(nr), np.minimum(up_cap.sum(axis=1) / below, 1.0)), axis=1)
            spine = np.zeros(2)
            if c.spine_link >= 0:
                spine[:] = (1.0, min(float(caps[c.spine_link]) / float(up_cap.sum()), 1.0))
            got = self.__dict__["_graph"] = {"machine": machine, "rack": rack, "spine": spine}
        return got

    def machines_block(self, out_m: np.ndarray, out_r: np.ndarray, plan: Plan) -> None:
        """Machine and rack nodes (Dict observation): free share, size, rack of each."""
        c = self.cluster
        out_m[:] = 0.0
        out_r[:] = 0.0
        nm, nr = c.num_machines, c.num_racks
        fpm = plan.free_per_machine
        out_m[:nm, 0] = 1.0
        out_m[:nm, 1] = fpm / c.machine_num_gpus
        out_m[:nm, 2] = c.machine_num_gpus / c.max_gpus_per_machine
        out_m[:nm, 3] = (c.machine_rack + 0.5) / nr
        out_r[:nr, 0] = 1.0
        out_r[:nr, 1] = plan.free_per_rack / c.rack_num_gpus
        mx = np.zeros(nr)
        np.maximum.at(mx, c.machine_rack, fpm)
        out_r[:nr, 2] = mx / c.max_gpus_per_machine
        empty = np.bincount(c.machine_rack, weights=fpm == c.machine_num_gpus, minlength=nr)
        out_r[:nr, 3] = empty / c.rack_num_machines

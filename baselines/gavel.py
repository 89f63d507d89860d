"""Gavel (Narayanan et al., OSDI'20): heterogeneity-aware policies as linear programs over
time fractions, enacted by a round-based mechanism, for every data-parallel job.

The Gavel paper is not in ../shared/papers. What we follow: its policies as optimisation
problems (paper 4), its round-based mechanism (paper 5) and the facts of its public
scheduler; Crius 8.1 and 9 describe the Gavel the Crius evaluation uses (throughput
maximisation, no change of GPU counts). Each choice:

- **Allocation** ``X[j, k]``: the fraction of time job ``j`` should run on GPU type ``k``,
  with ``sum_k X[j, k] <= 1`` and ``sum_j N_j X[j, k] <= GPUs of type k`` (``N_j`` the job's
  GPU count, Gavel's scale factor), solved with scipy's HiGHS (``linprog``) over the active
  jobs (waiting and running) at every round.
- **Throughputs** ``T[j, k]``: an adaptive-parallelism job (Crius's models) is profiled by its
  data-parallel-only plan on ``N_j`` GPUs of type ``k`` (``perf.parallelism``); a type where
  that plan runs out of memory gets 0, and a job whose plan fits nowhere is profiled only on
  its requested type. An ordinary job is profiled at its compute per iteration on each type
  (``perf.gpu_speed``: the profiled compute on the reference type times the type's factor),
  ``1 / (compute x factor)`` on every type with at least ``N_j`` GPUs, or only on the type it
  names (``Job.gpu_type``, a requirement); communication is left out of the profile, as
  Gavel profiles a job on one server. ``T`` is normalised by each job's best type for the
  objectives below; finish-time fairness uses the absolute iterations per second. The
  ``-agnostic`` variants (``gavel-las-agnostic``, ``gavel-ftf-history-agnostic``) profile every type
  at the reference type's speed, the heterogeneity-agnostic baselines of Gavel's evaluation
  (paper 7.2); they run in the same rounds on the same engine.
- **Policies** (paper 4.1-4.2, as named entrants):
  ``gavel`` maximises total normalised throughput ``sum_jk T X`` (the policy of the Crius
  evaluation); ``gavel-las`` is max-min fairness (Least Attained Service): maximise
  ``min_j N_j T_j X_j / T_j(X_equal)``, where ``T_j(X_equal)`` is the job's throughput on an
  equal time share of every type (``X_equal[j, k] = GPUs of k / all GPUs``) and the scale
  factor ``N_j`` makes max-min hold over GPU time (a 1-GPU job gets ``N_j`` times the time of
  an ``N_j``-GPU job of equal throughput, as in the paper); among the max-min optimal
  allocations a second LP picks the one of largest normalised GPU throughput
  ``sum_j N_j T_j X_j``, so no GPU idles that a job could use (our tie-break); on one GPU
  type the allocation is the water-filling one (lexicographic max-min of GPU time, in closed
  form), which is both. ``gavel-ftf`` is finish-time fairness: minimise
  ``max_j rho_j(X)`` with
  ``rho_j(X) = (t_j + R_j / T_j X_j) / (t_j + R_j / T_j(X_iso))``, ``t_j`` the time since
  the job arrived, ``R_j`` its remaining iterations and ``X_iso`` its isolated share: the
  heterogeneity-agnostic max-min time fraction ``min(1, c / N_j)`` (``c`` the water level at
  which the active jobs fill the cluster), spread over types in proportion to their GPUs.
  ``min max rho`` is solved by bisection on rho between its lower bound (every job on its
  best type all the time) and 1 (the isolated share; tolerance 1e-4 relative), each step a
  feasibility LP (a closed form on one GPU type), then the same GPU-throughput tie-break (on
  one type: water-filling of the GPU time left above each job's need).
  On one GPU type the isolated share is feasible, gives every job rho = 1 and no allocation
  lowers every rho, so the allocation is that share whatever the lengths: ``gavel-las``'s
  water-filling (checked against the bisection in ``tests/test_gavel.py``), computed without
  reading them.
  ``R_j`` is ground truth in the paper (jobs declare their iterations), so ``gavel-ftf`` is
  declared clairvoyant; ``gavel-ftf-history`` (our deployable variant) estimates ``R_j`` from
  the finished jobs' lengths (``sim.estimators``, method ``"history"``, at least one round of
  compute).
- **Mechanism** (paper 5): rounds of ``round_s`` seconds (default: the scenario's
  ``round_period_s`` when it sets one, so that every round-based entrant of a scenario uses
  the same rounds, else 360 s, Gavel's 6-minute rounds). At each round, jobs are considered
  in decreasing priority ``X[j, k] / (share of its time so far on k)`` (the share is the time
  on ``k`` since arrival over the time since arrival, at least 1e-3) and placed gang-wise on
  a type with enough free GPUs; a job that keeps its type
  keeps its GPUs (a lease extension, no restart), one that moves is migrated, one not chosen
  is preempted. Jobs that arrive or GPUs freed between rounds wait for the next round.
  Placement (the paper leaves it to the mechanism; our choice): Crius's jobs on as few
  machines of their type as possible, in job order (the Crius evaluation's placement); other
  jobs in decreasing GPU count, each on the most consolidated free GPUs (one machine, else
  one rack, else the fewest racks; on a heterogeneous cluster the fewest machines of the
  type), so that a gang is not spread over leftovers when its GPUs could be together.
- **Restart overhead**: what the engine charges for a preemption or migration (its
  checkpoint model: save on the old GPUs, restore on the new ones; see the engine docs).
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
from scipy import sparse
from scipy.optimize import linprog

from dlcluster_gym.errors import ConfigError
from dlcluster_gym.perf.parallelism import cluster_hardware, data_parallel_plan, is_adaptive_model
from dlcluster_gym.scheduler import BaseScheduler
from dlcluster_gym.sim.actions import Action, WakeUp
from dlcluster_gym.sim.boundary import JobTable
from dlcluster_gym.sim.estimators import remaining_iterations
from dlcluster_gym.sim.view import ClusterView, Plan

from .heterogeneous import Alloc, current_alloc, finalize, requested_type

ROUND_S = 360.0  # Gavel's round duration (paper 5: 6-minute rounds)
MIN_ROUND_S = 1.0
LENGTHS = ("known", "history")
HETEROGENEITY = ("aware", "agnostic")  # profile each GPU type, or every type as the reference
_TIE = 1e-7  # relative slack on the fairness level kept by the total-throughput tie-break
_RHO_TOL = 1e-4  # relative tolerance of the bisection on finish-time fairness


Triplets = tuple[np.ndarray, np.ndarray, np.ndarray]  # rows, columns, values; row-major


def _job_rows(
    vals: np.ndarray, n: int, row0: int, keep: np.ndarray | None = None, last: float = 0.0
) -> Triplets:
    """One constraint row per job (the jobs ``keep`` flags, default all), numbered from
    ``row0``, over ``n`` variables, ``X`` flattened job-major first: row j holds ``vals[j]``
    over X[j, :], then ``last`` in the last variable when it is not 0."""
    J, K = vals.shape
    js = np.arange(J) if keep is None else np.flatnonzero(keep)
    cols = js[:, None] * K + np.arange(K)
    v = vals[js].astype(np.float64)
    if last:
        cols = np.column_stack((cols, np.full(js.size, n - 1)))
        v = np.column_stack((v, np.full(js.size, float(last))))
    r = np.repeat(row0 + np.arange(js.size), cols.shape[1])
    return r, cols.reshape(-1), v.reshape(-1)


def _matrix(parts: Sequence[Triplets], rows: int, n: int) -> sparse.csr_array:
    """The CSR matrix of ``parts`` (row-major triplets, in row order) without its zeros:
    the same entries, in the same order, as the conversion of the dense matrix."""
    r = np.concatenate([p[0] for p in parts])
    c = np.concatenate([p[1] for p in parts])
    v = np.concatenate([p[2] for p in parts])
    nz = v != 0
    indptr = np.zeros(rows + 1, dtype=np.int64)
    np.cumsum(np.bincount(r[nz], minlength=rows), out=indptr[1:])
    return sparse.csr_array((v[nz], c[nz], indptr), shape=(rows, n))


def _base(
    thr: np.ndarray, demand: np.ndarray, caps: np.ndarray, extra: int = 0
) -> tuple[list[Triplets], np.ndarray, np.ndarray]:
    """Gavel's base constraints over ``X`` (flattened job-major) and ``extra`` trailing
    variables: ``sum_k X[j, k] <= 1``, ``sum_j N_j X[j, k] <= caps[k]``, ``0 <= X <= 1``
    where ``T > 0`` (else 0). Sparse (one row per job and one per type): the rows' triplets,
    ``b`` and the bounds; ``_matrix`` builds the matrix once the LP's own rows are added."""
    J, K = thr.shape
    n = J * K + extra
    d = np.asarray(demand, dtype=np.float64)
    type_rows = (
        np.repeat(J + np.arange(K), J),
        (np.arange(J)[None, :] * K + np.arange(K)[:, None]).reshape(-1),
        np.tile(d, K),
    )
    parts = [_job_rows(np.ones((J, K)), n, 0), type_rows]
    b = np.concatenate((np.ones(J), caps.astype(np.float64)))
    bounds = np.zeros((n, 2))
    bounds[: J * K, 1] = np.where(thr.reshape(-1) > 0, 1.0, 0.0)
    bounds[J * K :] = (-np.inf, np.inf)
    return parts, b, bounds


def _solve(c: np.ndarray, a: sparse.csr_array, b: np.ndarray, bounds: np.ndarray) -> np.ndarray:
    res = linprog(c, A_ub=a, b_ub=b, bounds=bounds, method="highs")
    if res.status != 0:  # pragma: no cover - every LP here is feasible (X = 0 and its levels)
        raise RuntimeError(f"gavel LP failed: {res.message}")
    return res.x


def max_sum_throughput(thr: np.ndarray, demand: np.ndarray, caps: np.ndarray) -> np.ndarray:
    """Gavel's max-sum-throughput allocation ``X`` [jobs, types] (HiGHS LP)."""
    J, K = thr.shape
    if J == 0:
        return np.zeros((0, K))
    if K == 1:  # a fractional knapsack: the fewest GPUs per unit of throughput first
        x = np.zeros((J, 1))
        left = float(caps[0])
        t = thr[:, 0]
        for j in np.lexsort((np.arange(J), -t / np.maximum(demand, 1), t <= 0)).tolist():
            if t[j] <= 0 or left <= 0:
                break
            x[j, 0] = min(1.0, left / float(demand[j]))
            left -= x[j, 0] * float(demand[j])
        return x
    parts, b, bounds = _base(thr, demand, caps)
    x = _solve(-thr.reshape(-1), _matrix(parts, b.size, J * K), b, bounds)
    return np.clip(x.reshape(J, K), 0.0, 1.0)


def _with_floor(
    thr: np.ndarray, demand: np.ndarray, caps: np.ndarray, coef: np.ndarray, floor: np.ndarray
) -> np.ndarray:
    """The allocation of largest normalised GPU throughput ``sum_j N_j T_j X_j`` with
    ``coef[j] . X[j] >= floor[j]`` for every job (the fairness level reached, kept while the
    rest of the cluster is filled)."""
    J, K = thr.shape
    parts, b, bounds = _base(thr, demand, caps)
    keep = floor > 0
    parts.append(_job_rows(-coef, J * K, b.size, keep))
    b = np.concatenate((b, -floor[keep]))
    a = _matrix(parts, b.size, J * K)
    x = _solve(-(thr * demand[:, None]).reshape(-1), a, b, bounds)
    return np.clip(x.reshape(J, K), 0.0, 1.0)


def fill_one_type(demand: np.ndarray, floor: np.ndarray, gpus: float) -> np.ndarray:
    """Time fractions on one GPU type: each job at least ``floor`` (feasible), the rest of
    the GPUs water-filled in GPU time (``N_j X_j = max(N_j floor_j, L)``, at most ``N_j``, with
    the level ``L`` that uses ``min(gpus, sum_j N_j)``): the lexicographic max-min of GPU time
    above the floors, one of the allocations of largest GPU throughput."""
    d = np.asarray(demand, dtype=np.float64)
    if d.size == 0:
        return d.copy()
    base = d * floor
    total = min(float(gpus), float(d.sum()))
    if base.sum() >= total * (1.0 - 1e-12):
        return np.asarray(floor, dtype=np.float64).copy()
    lo, hi = 0.0, float(d.max())
    for _ in range(200):  # bisection on the level (the used GPUs grow with it)
        mid = 0.5 * (lo + hi)
        if np.minimum(d, np.maximum(base, mid)).sum() > total:
            hi = mid
        else:
            lo = mid
        if hi - lo <= 1e-12 * max(hi, 1.0):
            break
    return np.minimum(d, np.maximum(base, lo)) / np.where(d > 0, d, 1.0)


def max_min_fairness(thr: np.ndarray, demand: np.ndarray, caps: np.ndarray) -> np.ndarray:
    """Gavel's max-min fairness (LAS) allocation ``X`` [jobs, types]: maximise the least
    ``N_j T_j X_j / T_j(X_equal)`` over jobs that can run anywhere, then the largest normalised
    GPU throughput at that level."""
    J, K = thr.shape
    if J == 0:
        return np.zeros((0, K))
    equal = thr @ (caps / caps.sum())
    runnable = equal > 0
    coef = (
        np.where(runnable[:, None], thr * demand[:, None], 0.0)
        / np.where(runnable, equal, 1.0)[:, None]
    )
    if not runnable.any():
        return np.zeros((J, K))
    if K == 1:  # water-filling: max-min optimal and of largest GPU throughput
        x = np.zeros((J, 1))
        x[runnable, 0] = fill_one_type(demand[runnable], np.zeros(int(runnable.sum())), caps[0])
        return x
    parts, b, bounds = _base(thr, demand, caps, extra=1)
    parts.append(_job_rows(-coef, J * K + 1, b.size, runnable, last=1.0))  # t - coef . X <= 0
    b = np.concatenate((b, np.zeros(int(runnable.sum()))))
    a = _matrix(parts, b.size, J * K + 1)
    c = np.zeros(J * K + 1)
    c[-1] = -1.0
    level = float(_solve(c, a, b, bounds)[-1])
    floor = np.where(runnable, level * (1.0 - _TIE), 0.0)
    return _with_floor(thr, demand, caps, coef, floor)


def water_level_share(demand: np.ndarray, gpus: float) -> np.ndarray:
    """The heterogeneity-agnostic max-min time fraction of each job: ``min(1, c / N_j)``
    with ``c`` the level at which ``sum_j N_j min(1, c / N_j) = min(gpus, sum_j N_j)``."""
    d = np.asarray(demand, dtype=np.float64)
    if d.size == 0:
        return d
    if d.sum() <= gpus:
        return np.ones_like(d)
    order = np.sort(d)
    left, rest = float(gpus), d.size
    level = 0.0
    for n in order:  # jobs with N_j <= level run all the time
        level = left / rest
        if n > level:
            break
        left -= n
        rest -= 1
    return np.minimum(1.0, level / d)


def finish_time_fairness(
    thr_abs: np.ndarray,
    demand: np.ndarray,
    caps: np.ndarray,
    elapsed: np.ndarray,
    remaining: np.ndarray,
) -> np.ndarray:
    """Gavel's finish-time-fairness allocation ``X`` [jobs, types]: minimise the largest
    ``rho_j(X) = (t_j + R_j / T_j X_j) / (t_j + R_j / T_j(X_iso))`` (bisection on rho over
    feasibility problems), then the largest normalised GPU throughput at that rho."""
    J, K = thr_abs.shape
    if J == 0:
        return np.zeros((0, K))
    best = thr_abs.max(axis=1)
    norm = thr_abs / np.where(best > 0, best, 1.0)[:, None]
    live = (best > 0) & (remaining > 0)
    iso = water_level_share(demand, float(caps.sum())) * (thr_abs @ (caps / caps.sum()))
    live &= iso > 0
    if not live.any():
        return max_sum_throughput(norm, demand, caps)
    t_iso = elapsed + remaining / np.where(live, iso, 1.0)

    def need(r: float) -> np.ndarray | None:
        """Throughput each live job needs for rho <= r (None: some job cannot reach r)."""
        slack = r * t_iso - elapsed
        if np.any(slack[live] <= 0):
            return None
        out = np.zeros(J)
        out[live] = remaining[live] / slack[live]
        return None if np.any(out > best * (1 + 1e-12)) else out

    base_parts, base_b, bounds = _base(thr_abs, demand, caps)  # the same at every step

    def feasible(r: float) -> bool:
        want = need(r)
        if want is None:
            return False
        if K == 1:  # closed form: time fractions want / T, GPUs sum N_j x_j
            x = np.where(live, want / np.where(best > 0, best, 1.0), 0.0)
            return bool(x.max() <= 1.0 + 1e-12 and demand @ x <= caps[0] * (1 + 1e-12))
        parts = [*base_parts, _job_rows(-thr_abs, J * K, base_b.size, live)]
        b = np.concatenate((base_b, -want[live]))
        res = linprog(
            np.zeros(J * K),
            A_ub=_matrix(parts, b.size, J * K),
            b_ub=b,
            bounds=bounds,
            method="highs",
        )
        return res.status == 0

    # rho with every job on its best type all the time: no allocation does better (lo <= 1);
    # the isolated share is feasible and gives every job rho = 1 (hi)
    lo = float(np.max((elapsed[live] + remaining[live] / best[live]) / t_iso[live]))
    hi = 1.0 + 1e-9
    if lo >= hi or feasible(lo):
        hi = max(lo, hi)
    while hi - lo > _RHO_TOL * hi:
        mid = 0.5 * (lo + hi)
        if feasible(mid):
            hi = mid
        else:
            lo = mid
    want = need(hi * (1.0 + _TIE))
    assert want is not None
    if K == 1:  # the floors, then water-filling of the GPU time left
        x = np.zeros((J, 1))
        ok = best > 0
        x[ok, 0] = fill_one_type(demand[ok], np.minimum(want[ok] / best[ok], 1.0), caps[0])
        return x
    return _with_floor(norm, demand, caps, thr_abs, want)


def _consolidated(plan: Plan, n: int, k: int) -> np.ndarray | None:
    """``n`` GPUs of type ``k``: the most consolidated placement (one machine, else one
    rack, else the fewest racks) on a homogeneous cluster, the fewest machines of the type
    otherwise."""
    if len(plan.cluster.gpu_types) == 1:
        return plan.find(n)
    return plan.find_on_type(n, k)


class Gavel(BaseScheduler):
    """Gavel's max-sum-throughput policy in rounds, fixed GPU counts (any data-parallel job;
    Crius's adaptive-parallelism jobs are profiled by their data-parallel plans)."""

    name = "gavel"
    objective = "max-sum-throughput"
    # The allocation is a function of the active jobs alone (their profiled throughputs and
    # demands, fixed at arrival, and the GPUs per type): a round with the same active jobs as
    # the last one reuses its LP solution (the same X; the solver is deterministic).
    allocation_by_jobs = True

    def __init__(self, *, round_s: float | None = None, heterogeneity: str = "aware") -> None:
        if round_s is not None and not (
            isinstance(round_s, int | float) and np.isfinite(round_s) and round_s >= MIN_ROUND_S
        ):
            raise ConfigError(
                f"round_s must be a number of seconds >= {MIN_ROUND_S:g} "
                f"(or null for the scenario's rounds, else {ROUND_S:g} s), got {round_s!r}"
            )
        if heterogeneity not in HETEROGENEITY:
            raise ConfigError(
                f"heterogeneity must be one of {', '.join(HETEROGENEITY)}, got {heterogeneity!r}"
            )
        super().__init__(round_s=round_s, heterogeneity=heterogeneity)
        self.round_s = None if round_s is None else float(round_s)
        self.aware = heterogeneity == "aware"

    def check_workload(self, view: ClusterView, jobs: JobTable) -> None:
        """Every GPU job applies (parameter-server jobs on CPUs are refused by the engine)."""

    def reset(self, view: ClusterView, rng: np.random.Generator) -> None:
        super().reset(view, rng)
        self.caps = view.cluster.type_num_gpus.astype(np.int64)
        n, K = view.num_job_ids, self.caps.size
        self.hw = None  # per-type hardware, built at the first adaptive-parallelism job
        self.thr = np.zeros((n, K))  # iterations per second per type, filled at arrival
        self.adaptive = np.zeros(n, dtype=bool)  # Crius's adaptive-parallelism jobs
        self.demand = view.demand
        self._seen = 0
        self.time_on = np.zeros((n, K))
        self._last = 0.0
        scenario_round = view.scenario.round_period_s
        # the scenario's round triggers, or our own clock (wake-ups at multiples of round_s)
        self._scenario_rounds = self.round_s is None and scenario_round is not None
        self._period = float(scenario_round) if self._scenario_rounds else self.round_s or ROUND_S
        self._round_at = -1.0  # the instant of the last round (one round per instant)
        self._last_active = b""  # the active jobs of the last allocation, and its X
        self._last_x = np.zeros((0, K))

    def _profile(self, view: ClusterView, j: int) -> np.ndarray:
        """Iterations per second of job ``j`` on each GPU type (0: it cannot run there)."""
        spec = view.jobs[j]
        K = self.caps.size
        out = np.zeros(K)
        if is_adaptive_model(spec.model):
            if self.hw is None:
                self.hw = cluster_hardware(view.cluster)
            hw = self.hw
            for k in range(K):
                if spec.num_gpus <= self.caps[k]:
                    p = data_parallel_plan(spec.model, hw[k], spec.num_gpus)
                    if p is not None:
                        out[k] = 1.0 / p.iter_time_s
            if out.max() <= 0:
                out[requested_type(view, j)] = 1.0 / float(view.compute_s[j])
            return out
        fits = self.caps >= spec.num_gpus
        if spec.gpu_type is not None and K > 1:
            fits &= np.arange(K) == requested_type(view, j)
        scale = view.type_compute_scale[j] if self.aware else np.ones(K)
        out[fits] = 1.0 / (float(view.compute_s[j]) * scale[fits])
        return out

    def _sync(self, view: ClusterView) -> None:
        """Profile the jobs that arrived since the last call on every GPU type."""
        new = view.arrivals(self._seen)
        self._seen += len(new)
        for j in new:
            self.thr[j] = self._profile(view, j)
            self.adaptive[j] = is_adaptive_model(view.jobs[j].model)

    def _is_round(self, view: ClusterView) -> bool:
        if self._scenario_rounds:
            return any(t.kind == "round" for t in view.triggers)
        k = round(view.now / self._period)
        on_boundary = abs(view.now - k * self._period) <= 1e-9 * max(1.0, view.now)
        return on_boundary and view.now != self._round_at  # once per instant

    def allocation(self, view: ClusterView, active: np.ndarray) -> np.ndarray:
        """``X`` [active jobs, types] of the policy."""
        thr = self.thr[active]
        best = thr.max(axis=1)
        norm = thr / np.where(best > 0, best, 1.0)[:, None]
        return max_sum_throughput(norm, self.demand[active], self.caps)

    def _allocation_of(self, view: ClusterView, active: np.ndarray) -> np.ndarray:
        """``allocation``, reused from the last round when its active jobs were the same and
        the allocation depends on them alone (``allocation_by_jobs``)."""
        if not self.allocation_by_jobs:
            return self.allocation(view, active)
        key = active.tobytes()
        if key != self._last_active:
            self._last_x = self.allocation(view, active)
            self._last_active = key
        return self._last_x

    def schedule(self, view: ClusterView) -> Sequence[Action]:
        self._sync(view)
        period = self._period
        following = (round(view.now / period) + 1) * period
        if not self._is_round(view):
            following = (view.now // period + 1) * period
            if self._scenario_rounds:
                if view.num_waiting and not view.running():  # idle until the next round
                    return [WakeUp(following)]
                return ()
            if view.num_waiting or view.running():
                return [WakeUp(following)]
            return ()
        self._round_at = view.now
        actions = self._round(view)
        if not self._scenario_rounds and (view.num_waiting or view.running() or actions):
            actions = [*actions, WakeUp(following)]
        return actions

    def _round(self, view: ClusterView) -> list[Action]:
        dt = view.now - self._last
        self._last = view.now
        running = view.running()
        for j in running:
            a = current_alloc(view, j)
            if a is not None:
                self.time_on[j, a[1]] += dt
        active = np.asarray(sorted({*running, *view.iter_waiting()}), dtype=np.int64)
        if active.size == 0:
            return []
        x = self._allocation_of(view, active)
        age = np.array([max(view.now - view.jobs[j].arrival_s, 1.0) for j in active.tolist()])
        share = self.time_on[active] / age[:, None]
        prio = np.where(x > 1e-9, x / np.maximum(share, 1e-3), -1.0)
        free = self.caps.copy()
        target: dict[int, Alloc | None] = {int(j): None for j in active.tolist()}
        order = np.argsort(-prio, axis=None, kind="stable")
        placed: set[int] = set()
        for flat in order.tolist():
            i, k = divmod(flat, self.caps.size)
            if prio[i, k] < 0:
                break
            j = int(active[i])
            if j in placed or free[k] < self.demand[j]:
                continue
            placed.add(j)
            free[k] -= self.demand[j]
            target[j] = (int(self.demand[j]), int(k))
        if self.adaptive[active].all():  # Crius's jobs: the evaluation's placement
            return finalize(view, target)
        # largest gangs first, each on the most consolidated GPUs of its type
        ordered = dict(sorted(target.items(), key=lambda kv: (-self.demand[kv[0]], kv[0])))
        return finalize(view, ordered, _consolidated)


class GavelLAS(Gavel):
    """Gavel's max-min fairness (LAS) policy in rounds."""

    name = "gavel-las"
    objective = "max-min-fairness"

    def allocation(self, view: ClusterView, active: np.ndarray) -> np.ndarray:
        thr = self.thr[active]
        best = thr.max(axis=1)
        norm = thr / np.where(best > 0, best, 1.0)[:, None]
        return max_min_fairness(norm, self.demand[active], self.caps)


class GavelFTF(Gavel):
    """Gavel's finish-time-fairness policy in rounds; ``lengths="known"`` reads each job's
    remaining iterations (the paper's information model: clairvoyant), ``"history"``
    estimates them from the finished jobs (deployable)."""

    name = "gavel-ftf"
    objective = "finish-time-fairness"
    allocation_by_jobs = False  # finish-time fairness moves with time and attained service

    def __init__(
        self, *, round_s: float | None = None, lengths: str = "known", heterogeneity: str = "aware"
    ) -> None:
        if lengths not in LENGTHS:
            raise ConfigError(f"lengths must be one of {', '.join(LENGTHS)}, got {lengths!r}")
        super().__init__(round_s=round_s, heterogeneity=heterogeneity)
        self.params["lengths"] = lengths
        self.lengths = lengths
        self.clairvoyant = lengths == "known"

    def reset(self, view: ClusterView, rng: np.random.Generator) -> None:
        super().reset(view, rng)
        if self.lengths == "known":
            self._iters = np.array([j.iterations for j in view.oracle.jobs], dtype=np.float64)

    def allocation(self, view: ClusterView, active: np.ndarray) -> np.ndarray:
        if self.caps.size == 1:
            # On one GPU type the isolated share is feasible, gives every job rho = 1 and no
            # allocation lowers every rho: the finish-time-fair allocation is that share, the
            # max-min water-filling, whatever the remaining lengths.
            return GavelLAS.allocation(self, view, active)
        done = view.iterations_done_of(active)
        if self.lengths == "known":
            remaining = np.maximum(self._iters[active] - done, 0.0)
        else:
            remaining = remaining_iterations(
                view.history, view.compute_s[active], done, method="history",
                floor_s=self._period,
            )  # fmt: skip
        elapsed = view.now - view.arrival_s[active]
        return finish_time_fairness(
            self.thr[active], self.demand[active], self.caps, elapsed, remaining
        )


class GavelFTFHistory(GavelFTF):
    """``gavel-ftf`` with remaining iterations estimated from finished jobs (deployable)."""

    name = "gavel-ftf-history"

    def __init__(
        self,
        *,
        round_s: float | None = None,
        lengths: str = "history",
        heterogeneity: str = "aware",
    ) -> None:
        super().__init__(round_s=round_s, lengths=lengths, heterogeneity=heterogeneity)


class GavelLASAgnostic(GavelLAS):
    """``gavel-las`` profiling every GPU type at the reference type's speed: the
    heterogeneity-agnostic max-min fairness baseline of Gavel's evaluation."""

    name = "gavel-las-agnostic"

    def __init__(self, *, round_s: float | None = None, heterogeneity: str = "agnostic") -> None:
        super().__init__(round_s=round_s, heterogeneity=heterogeneity)


class GavelFTFHistoryAgnostic(GavelFTFHistory):
    """``gavel-ftf-history`` profiling every GPU type at the reference type's speed: the
    heterogeneity-agnostic finish-time fairness baseline (deployable)."""

    name = "gavel-ftf-history-agnostic"

    def __init__(
        self,
        *,
        round_s: float | None = None,
        lengths: str = "history",
        heterogeneity: str = "agnostic",
    ) -> None:
        super().__init__(round_s=round_s, lengths=lengths, heterogeneity=heterogeneity)

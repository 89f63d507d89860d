"""Crius: Cell-based scheduling of large models with adaptive parallelism on heterogeneous
GPU clusters (Xue et al., "A Codesign of Scheduling and Parallelization for Large Model
Training in Heterogeneous Clusters").

- **Cells (4.2, 6.1 "Initializing Cells")**: for a job that asks for ``N`` GPUs, a Cell is a
  GPU count in ``{N/2, N, 2N}`` x a GPU type x a pipeline stage count in ``1, 2, 4, .. <= n``
  (``perf.parallelism.stage_choices``), stages cut by FLOPs (``stage_bounds``, Fig. 7).
- **Agile estimation (5.1)**: a Cell's iteration time is the best of the ``2^S`` plans
  assembled from data-only and tensor-only stage plans (``perf.parallelism.cell_estimate``);
  per (count, type) Crius keeps the Cell with the best estimate.
- **Cell-guided tuning (5.2)**: a scheduled Cell's plan is searched in the pruned half-ranges
  (``cell_tune``); the engine runs every job at its exhaustive best plan (the tuning accuracy
  is reported by experiments/reproductions/reproduce_crius.py, not re-simulated).
- **Scheduling (6.1, Algorithm 1)**: on arrivals (SchedArrival) and departures
  (SchedDeparture) Crius runs CellBasedSched: ScaleResource explores choices that place the
  job on one of its Cells, scaling at most ``search_depth`` (3, 8.4) running jobs down within
  their Cells or onto another GPU type to make room; BestPerf keeps the choice with the
  highest cluster throughput; VirtualAlloc applies it to a virtual allocation. After
  departures, pending jobs are retried, then the released GPUs go to running jobs (scale-up,
  again at most ``search_depth`` moves). FinalizeAlloc turns the virtual allocation into
  actions once per decision.
- **Opportunistic execution (6.1)**: when the oldest starving pending job (waiting for
  ``starvation_s``, 1 hour, or more) does not fit, later jobs run opportunistically; once its
  minimum requirement (its smallest Cell) is covered by idle GPUs plus opportunistic jobs on
  one type, those are suspended for it. The paper gives no threshold; without one every
  momentary miss would suspend jobs.
- **Triggers and rounds (6.1, 7)**: Algorithm 1 runs on every arrival and departure; the
  scenario's rounds (``round_period_s``, 5 minutes in the presets, Crius 7's scheduling
  interval) also retry pending jobs and scale up, as a departure does. ``act_on="rounds"``
  batches arrivals and departures to the next round instead.

- **Estimation error (optional, ours)**: the paper's estimator profiles on one device and
  models the pipeline, so its estimates differ from measured runs (8.2: 93.4 % accuracy on
  average, 90.5 % at worst). Here the estimator and the engine are one analytical model, so
  estimates are exact unless ``estimate_noise`` (sigma) > 0: then every agile Cell estimate
  is multiplied by ``exp(sigma * z)``, z ~ N(0, 1) drawn from a generator seeded by
  ``(noise_seed, job id)`` in the fixed Cell enumeration order (deterministic, independent
  of the run's other randomness). The engine still runs jobs at their true plans; only
  Crius's decisions see the error. ``estimate_noise=0.083`` gives a mean relative error of
  6.6 % (sigma x sqrt(2/pi)), the paper's 93.4 % mean estimation accuracy.

Choices the paper leaves open (documented in docs/crius.md):

- *Cluster throughput* (BestPerf): the sum over running jobs of their estimated throughput
  normalised by their estimated throughput on the requested Cell (GPU amount and type). The
  paper sums raw throughputs; samples/s of different models are not comparable (a
  Wide-ResNet-6.8B sample is ~15x the work of a MoE-0.69B one), so raw sums would favour
  small models.
- *Scaling choices*: for each target Cell of the job, the fewest-loss set of at most
  ``search_depth`` moves (one per running job) that frees enough GPUs of the Cell's type,
  found greedily by throughput loss per freed GPU, and also as the best single move.
- *Scale-up*: a move is taken only when it raises the job's throughput by ``min_gain``
  (10%) or more, since every scaling restarts the job (scenario ``restart_s``).
"""

from __future__ import annotations

import math
import time
from collections.abc import Sequence

import numpy as np

from dlcluster_gym.errors import ConfigError
from dlcluster_gym.perf.parallelism import cell_estimate, cluster_hardware, stage_choices
from dlcluster_gym.scheduler import BaseScheduler
from dlcluster_gym.sim.actions import Action
from dlcluster_gym.sim.boundary import JobTable
from dlcluster_gym.sim.view import ClusterView

from .heterogeneous import (
    Alloc,
    current_alloc,
    finalize,
    requested_type,
    require_adaptive_jobs,
)


def estimate_noise_rng(noise_seed: int, key: int) -> np.random.Generator:
    """The generator of the estimation errors of one job (or one study point): seeded by
    ``(noise_seed, key)`` so the errors do not depend on call order or on the run's rng."""
    return np.random.default_rng((int(noise_seed), int(key)))


class Crius(BaseScheduler):
    """Crius (6.1, Algorithm 1) with Cells and agile estimation."""

    name = "crius"

    def __init__(
        self,
        *,
        search_depth: int = 3,
        min_gain: float = 0.1,
        opportunistic: bool = True,
        starvation_s: float = 3600.0,
        act_on: str = "events",
        estimate_noise: float = 0.0,
        noise_seed: int = 0,
    ) -> None:
        super().__init__(
            search_depth=search_depth, min_gain=min_gain, opportunistic=opportunistic,
            starvation_s=starvation_s, act_on=act_on, estimate_noise=estimate_noise,
            noise_seed=noise_seed,
        )  # fmt: skip
        if (
            isinstance(estimate_noise, bool)
            or not isinstance(estimate_noise, int | float)
            or not (math.isfinite(estimate_noise) and 0 <= estimate_noise <= 1)
        ):
            raise ConfigError(
                f"estimate_noise must be a relative std between 0 and 1, got {estimate_noise!r}"
            )
        if isinstance(noise_seed, bool) or not isinstance(noise_seed, int) or noise_seed < 0:
            raise ConfigError(f"noise_seed must be an integer >= 0, got {noise_seed!r}")
        self.estimate_noise = float(estimate_noise)
        self.noise_seed = int(noise_seed)
        if not (float(starvation_s) >= 0):  # inf: never starving; NaN fails too
            raise ConfigError(f"starvation_s must be a number >= 0, got {starvation_s!r}")
        if not (math.isfinite(min_gain) and min_gain >= 0):
            raise ConfigError(f"min_gain must be a finite number >= 0, got {min_gain!r}")
        self.starvation_s = float(starvation_s)
        if act_on not in ("events", "rounds"):
            raise ConfigError(f"act_on must be 'events' or 'rounds', got {act_on!r}")
        self.act_on = act_on
        if search_depth < 0:
            raise ConfigError(f"search_depth must be an integer >= 0, got {search_depth}")
        self.search_depth = int(search_depth)
        self.min_gain = float(min_gain)
        self.opportunistic = bool(opportunistic)
        self.decision_s: list[float] = []  # wall time of each decision that did work

    # ------------------------------------------------------------------ setup
    def check_workload(self, view: ClusterView, jobs: JobTable) -> None:
        require_adaptive_jobs(view, jobs, "crius")

    def reset(self, view: ClusterView, rng: np.random.Generator) -> None:
        super().reset(view, rng)
        self.hw = cluster_hardware(view.cluster)
        self.caps = view.cluster.type_num_gpus.astype(np.int64)
        self.cells: dict[int, dict[Alloc, float]] = {}
        self.cell_stages: dict[int, dict[Alloc, int]] = {}
        self.cells_arr: dict[int, tuple[np.ndarray, np.ndarray, np.ndarray]] = {}
        self._cell_sig: dict[int, tuple] = {}  # job -> its Cells as a hashable signature
        self._mv_rows: dict[int, tuple[Alloc, tuple[np.ndarray, ...] | None]] = {}
        self._mv: dict[str, np.ndarray] | None = None
        self._memo: dict = {}  # _free_up / _reach answers for the current virtual state
        self.alloc: dict[int, Alloc] = {}
        self.free = self.caps.copy()
        self.blocked: int | None = None
        self.opp: set[int] = set()
        self._departed = False
        self._rounds = view.scenario.round_period_s is not None
        self.decision_s = []

    def init_cells(self, view: ClusterView, job: int) -> dict[Alloc, float]:
        """Cells of a job (6.1): estimated normalised throughput per (count, type), each from
        its best stage count (5.1 agile estimation)."""
        spec = view.jobs[job]
        n_req = spec.num_gpus
        counts = sorted({n_req // 2, n_req, 2 * n_req} - {0})
        est: dict[Alloc, float] = {}
        stages: dict[Alloc, int] = {}
        noise = estimate_noise_rng(self.noise_seed, job) if self.estimate_noise > 0 else None
        for n in counts:
            for k, hw in enumerate(self.hw):
                if n > self.caps[k]:
                    continue
                best, best_s = np.inf, 0
                for s in stage_choices(spec.model, n):
                    p = cell_estimate(spec.model, hw, n, s)
                    if p is None:
                        continue
                    t = p.iter_time_s
                    if noise is not None:
                        t *= math.exp(self.estimate_noise * noise.standard_normal())
                    if t < best:
                        best, best_s = t, s
                if np.isfinite(best):
                    est[(n, k)] = best
                    stages[(n, k)] = best_s
        ref = est.get((n_req, requested_type(view, job)))
        if ref is None:
            at_req = [t for (n, _), t in est.items() if n == n_req]
            ref = min(at_req) if at_req else (min(est.values()) if est else 1.0)
        cells = {a: ref / t for a, t in est.items()}
        self.cells[job] = cells
        self._set_arr(job)
        self.cell_stages[job] = stages
        return cells

    # ------------------------------------------------------------------ Algorithm 1
    def schedule(self, view: ClusterView) -> Sequence[Action]:
        trig = view.triggers
        if any(t.kind in ("finish", "round") for t in trig):
            self._departed = True  # rounds retry pending jobs and scale up, as departures do
        if self.act_on == "rounds" and self._rounds and not any(t.kind == "round" for t in trig):
            return ()
        if view.num_waiting == 0 and not self._departed:
            return ()
        t0 = time.perf_counter()
        self._sync(view)
        waiting = view.waiting()
        new = [j for j in waiting if j not in self.cells]
        for j in new:
            self.init_cells(view, j)
        if self.opportunistic:
            self._opportunistic(view)
        # SchedArrival: new jobs; SchedDeparture: pending jobs again, then released GPUs.
        todo = waiting if self._departed else new
        for j in todo:
            if j in self.alloc:
                continue
            if self._cell_based_sched(j):
                if self.blocked is not None and j != self.blocked:
                    self.opp.add(j)
            elif self.blocked is None and view.now - view.jobs[j].arrival_s >= self.starvation_s:
                self.blocked = j
        if self._departed and self.free.sum() > 0:
            self._scale_up()
        self._departed = False
        target = {j: self.alloc.get(j) for j in (*view.running(), *waiting)}
        actions = finalize(view, target)
        self.decision_s.append(time.perf_counter() - t0)
        return actions

    def _set_arr(self, job: int) -> None:
        cells = self.cells[job]
        self.cells_arr[job] = (
            np.array([a[0] for a in cells], dtype=np.int64),
            np.array([a[1] for a in cells], dtype=np.int64),
            np.array(list(cells.values()), dtype=np.float64),
        )
        self._cell_sig[job] = tuple(cells.items())
        self._mv_rows.pop(job, None)

    def _sync(self, view: ClusterView) -> None:
        """Virtual allocation := the actual one (jobs finished since the last decision)."""
        self.alloc = {}
        for j in view.running():
            a = current_alloc(view, j)
            if a is not None:
                self.alloc[j] = a
                if j not in self.cells:
                    self.init_cells(view, j)
                if a not in self.cells[j]:
                    self.cells[j][a] = 0.0
                    self._set_arr(j)
        used = np.zeros_like(self.caps)
        for n, k in self.alloc.values():
            used[k] += n
        self.free = self.caps - used
        self._mv = None
        self._memo: dict = {}
        self.opp &= set(self.alloc)
        if self.blocked is not None and self.blocked in self.alloc:
            self.blocked = None
            self.opp.clear()

    def _take(self, job: int, a: Alloc | None) -> None:
        if self._mv is not None:  # a job is scaled at most once per decision
            self._mv["valid"] &= self._mv["job"] != job
        self._memo = {}
        old = self.alloc.pop(job, None)
        if old is not None:
            self.free[old[1]] += old[0]
        if a is not None:
            self.alloc[job] = a
            self.free[a[1]] -= a[0]

    def _cell_based_sched(self, job: int) -> bool:
        """ScaleResource + BestPerf + VirtualAlloc for one job (Algorithm 1 lines 14-20).

        A pending job's answer depends only on its Cells and the virtual allocation, so a
        failure is remembered per Cell signature until the allocation changes (``_take``
        clears the memo): the next pending job with the same Cells fails without a search."""
        fail_key = ("fail", self._cell_sig[job]) if job not in self.alloc else None
        if fail_key is not None and fail_key in self._memo:
            return False
        best_val, best = 0.0, None
        reach: dict[int, int] = {}
        for a, thr in self.cells[job].items():
            if thr <= best_val:
                continue
            n, k = a
            if self.free[k] >= n:
                val, moves = thr, []
            else:
                if k not in reach:
                    reach[k] = self._reach(k)
                if n > reach[k]:
                    continue
                found = self._free_up(k, n - int(self.free[k]), job)
                if found is None:
                    continue
                moves, loss = found
                val = thr - loss
            if val > best_val + 1e-12:
                best_val, best = val, (a, moves)
        if best is None:
            if fail_key is not None:
                self._memo[fail_key] = True
            return False
        a, moves = best
        for r, a2 in moves:
            self._take(r, a2)
        self._take(job, a)
        return True

    def _moves(self) -> dict[str, np.ndarray]:
        """Every scaling of a running job to another of its Cells, as arrays, built once per
        decision; the rows of a job whose allocation changed since are marked invalid."""
        if self._mv is not None:
            return self._mv
        parts = []
        for r, a in self.alloc.items():
            hit = self._mv_rows.get(r)
            if hit is None or hit[0] != a:  # rows of job r, cached per (Cells, allocation)
                hit = (a, self._job_moves(r, a))
                self._mv_rows[r] = hit
            if hit[1] is not None:
                parts.append(hit[1])
        cols = ("job", "n", "k", "n2", "k2", "loss")
        if parts:
            self._mv = {c: np.concatenate([p[i] for p in parts]) for i, c in enumerate(cols)}
        else:
            self._mv = {c: np.zeros(0, dtype=np.int64) for c in cols}
        self._mv["valid"] = np.ones(self._mv["job"].size, dtype=bool)
        return self._mv

    def _job_moves(self, r: int, a: Alloc) -> tuple[np.ndarray, ...] | None:
        """The scalings of running job ``r`` from ``a`` to its other Cells (None: none)."""
        n_r, k_r = a
        n2, k2, thr = self.cells_arr[r]
        cur = self.cells[r].get(a, 0.0)
        keep = (n2 != n_r) | (k2 != k_r)
        m = int(keep.sum())
        if not m:
            return None
        return (np.full(m, r), np.full(m, n_r), np.full(m, k_r), n2[keep], k2[keep],
                np.maximum(cur - thr[keep], 0.0))  # fmt: skip

    def _reach(self, k: int) -> int:
        """Upper bound on the GPUs of type ``k`` that ``search_depth`` scalings can free."""
        key = ("reach", k)
        if key not in self._memo:
            held = sorted((n for n, kk in self.alloc.values() if kk == k), reverse=True)
            self._memo[key] = int(self.free[k]) + sum(held[: self.search_depth])
        return self._memo[key]

    def _free_up(self, k: int, need: int, job: int) -> tuple[list[tuple[int, Alloc]], float] | None:
        """At most ``search_depth`` scalings of running jobs on type ``k`` (down within their
        Cells, or onto another type with idle GPUs) that free ``need`` GPUs of ``k``, with
        the least total throughput loss; None when no such choice exists."""
        if self.search_depth == 0:
            return None
        key = (k, need)
        if job not in self.alloc and key in self._memo:  # same state, same question
            return self._memo[key]
        out = self._free_up_search(k, need, job)
        if job not in self.alloc:
            self._memo[key] = out
        return out

    def _free_up_search(
        self, k: int, need: int, job: int
    ) -> tuple[list[tuple[int, Alloc]], float] | None:
        mv = self._moves()
        same = mv["k2"] == k
        ok = mv["valid"] & (mv["k"] == k) & (mv["job"] != job)
        ok &= np.where(same, mv["n2"] < mv["n"], mv["n2"] <= self.free[mv["k2"]])
        idx = np.flatnonzero(ok)
        if idx.size == 0:
            return None
        freed = np.where(same[idx], mv["n"][idx] - mv["n2"][idx], mv["n"][idx])
        loss = mv["loss"][idx]
        # Best single move.
        big = freed >= need
        single = None
        if big.any():
            b = np.flatnonzero(big)
            i = int(b[np.lexsort((mv["job"][idx[b]], loss[b]))[0]])
            single = ([(int(mv["job"][idx[i]]), (int(mv["n2"][idx[i]]), int(mv["k2"][idx[i]])))],
                      float(loss[i]))  # fmt: skip
        # Greedy by loss per freed GPU, one move per job, at most search_depth moves.
        order = np.lexsort((mv["job"][idx], loss / freed))
        chosen: list[tuple[int, Alloc]] = []
        used: set[int] = set()
        other = self.free.copy()
        got, total = 0, 0.0
        for o in order.tolist():
            row = int(idx[o])
            r, n2, k2 = int(mv["job"][row]), int(mv["n2"][row]), int(mv["k2"][row])
            if r in used or (k2 != k and n2 > other[k2]):
                continue
            chosen.append((r, (n2, k2)))
            used.add(r)
            if k2 != k:
                other[k2] -= n2
            got += int(freed[o])
            total += float(loss[o])
            if got >= need or len(chosen) >= self.search_depth:
                break
        greedy = (chosen, total) if got >= need else None
        if single is not None and (greedy is None or single[1] < greedy[1]):
            return single
        return greedy

    def _scale_up(self) -> None:
        """Extra scheduling (Algorithm 1 line 12): give idle GPUs to running jobs, at most
        ``search_depth`` scalings, each raising the job's throughput by ``min_gain``."""
        for _ in range(self.search_depth):
            best_gain, best = 0.0, None
            for r, (n_r, k_r) in self.alloc.items():
                cells = self.cells[r]
                cur = cells.get((n_r, k_r), 0.0)
                for (n2, k2), thr in cells.items():
                    if thr < cur * (1.0 + self.min_gain) or thr - cur <= best_gain:
                        continue
                    extra = n2 - n_r if k2 == k_r else n2
                    if extra <= 0 or extra > self.free[k2]:
                        continue
                    best_gain, best = thr - cur, (r, (n2, k2))
            if best is None:
                return
            self._take(*best)

    def _opportunistic(self, view: ClusterView) -> None:
        """Suspend opportunistic jobs for the oldest pending job once its smallest Cell is
        covered by idle GPUs plus the opportunistic jobs on one type (6.1). Called right
        after ``_sync`` (the virtual allocation is the actual one)."""
        j = self.blocked
        if j is None or not self.opp:
            return
        cells = sorted(self.cells[j].items(), key=lambda x: (x[0][0], -x[1]))
        for (n, k), _thr in cells:
            opp = [r for r in self.opp if self.alloc[r][1] == k]
            if self.free[k] + sum(self.alloc[r][0] for r in opp) < n:
                continue
            start = np.asarray(view.last_start_s)
            for r in sorted(opp, key=lambda r: (-start[r], -r)):  # most recent first
                if self.free[k] >= n:
                    break
                self._take(r, None)
                self.opp.discard(r)
            self._take(j, (n, k))
            self.blocked = None
            self.opp.clear()
            return

"""Estimates from observable facts: what a real scheduler uses in place of job lengths.

One module for every policy and env that needs a job's remaining work without being
clairvoyant. The facts are a job's attained iterations (``view.done_iters``/``view.live``),
its per-iteration compute profile (``view.compute_s``) and the history of finished jobs
(``view.history``: a finished job's length is known once it has finished).

Methods for a job's remaining iterations (``remaining_iterations``):

- ``"attained"``: as many again as it has done (least-attained-service reasoning: under the
  heavy-tailed lengths of DL clusters a job that has run long is likely to run long), and at
  least ``floor_s`` of compute so that a new job's estimate is not zero.
- ``"history"``: the expected remaining work under the empirical distribution of the
  finished jobs' lengths (iterations x compute per iteration), given the work done so far:
  the mean length of the finished jobs longer than that work, minus it. ``"attained"`` where
  no finished job is longer (or none has finished yet).
- ``"model-history"``: ``"history"`` over the finished jobs of the same model, and over all
  finished jobs where none of that model is longer.
- ``"keyed"``: ``"history"`` over the latest finished jobs that share the job's submission
  attributes, most specific first (``KEY_LEVELS``): the same user and job name (a recurring
  job), else the same virtual cluster and GPU count, else the same virtual cluster; then all
  finished jobs, then ``"attained"``. Each key keeps the ``window`` (20) latest finished jobs:
  recent jobs predict better than old ones (teams change what they run), and a window keeps
  the estimate cheap. A level is used when it holds a length longer than the work done.

The same keys give a job's expected length at submission (:func:`keyed_length`): the mean
length of the latest finished jobs of its most specific key that has any, which is what a
shortest-expected-service-first order needs (Helios's QSSF, ``baselines/qssf.py``). Lengths
enter a key only when a job finishes, so no estimate reads a running or future job.
"""

from __future__ import annotations

import bisect

import numpy as np

from dlcluster_gym.errors import ConfigError
from dlcluster_gym.perf import estimate_kernel
from dlcluster_gym.sim.state import EngineState

METHODS: tuple[str, ...] = ("attained", "history", "model-history", "keyed")
KEY_LEVELS: tuple[str, ...] = ("user-name", "vc-gpus", "vc")
"""The keyed estimators' levels, most specific first: (user, job name), (virtual cluster, GPU
count), virtual cluster. Level ``len(KEY_LEVELS)`` is all finished jobs."""
KEY_WINDOW = 20
"""Finished jobs kept per key (the latest)."""

Key = tuple[int, str, str | int]


def job_keys(vc: str, user: str, job_name: str, num_gpus: int) -> tuple[Key | None, ...]:
    """A job's keys, one per ``KEY_LEVELS`` entry (None where it has no such attribute: no user
    and no job name, or no VC). A trace without VCs still keys by GPU count (VC "")."""
    named = (0, user, job_name) if (user or job_name) else None
    return named, (1, vc, int(num_gpus)), ((2, vc, "") if vc else None)


class History:
    """The finished jobs (``view.history``): ids in finish order, and their lengths sorted.

    Lengths are in seconds of ideal compute (iterations x compute per iteration, no
    communication), GPU-service in GPU-seconds of ideal compute (x GPUs). The sorted arrays
    are built when read, from the jobs finished since."""

    def __init__(self, engine: EngineState) -> None:
        self._e = engine
        self._seen = 0
        self._work = _EMPTY
        self._by_model: dict[str, np.ndarray] = {}
        self._service: list[float] = []
        # finished jobs (in finish order) not yet in the pooled sorted lengths / the per-model
        # ones / the sorted GPU-service / the key windows: each taken in when it is read
        self._pending_work: list[int] = []
        self._pending_model: list[int] = []
        self._pending_service: list[int] = []
        self._pending_ring: list[int] = []
        self._arrays: dict[str | None, tuple[np.ndarray, np.ndarray]] = {}
        # keyed windows: one row per key (row 0: all finished jobs), the KEY_WINDOW latest
        # lengths in a ring (NaN: empty); each job's row per level (-1: no such key)
        self._kid: dict[Key, int] = {}
        self._ring = np.full((8, KEY_WINDOW), np.nan)
        self._filled = np.zeros(8, dtype=np.int64)
        self._job_rows = np.full((len(engine.jobs), len(KEY_LEVELS) + 1), -2, dtype=np.int64)

    @property
    def count(self) -> int:
        """Jobs finished so far."""
        return len(self._e.finished_order)

    def jobs(self) -> np.ndarray:
        """Finished job ids, in the order they finished."""
        return np.asarray(self._e.finished_order, dtype=np.int64)

    def _sync(self) -> None:
        """Note the jobs finished since the last call; each structure takes them in when it
        is read (``_sorted_work``, ``_sorted_models``, ``_sorted_service``, ``_fill_ring``)."""
        order = self._e.finished_order
        if self._seen == len(order):
            return
        new = order[self._seen :]
        self._pending_work.extend(new)
        self._pending_model.extend(new)
        self._pending_service.extend(new)
        self._pending_ring.extend(new)
        self._seen = len(order)

    def _fill_ring(self) -> None:
        """``_sync``, then the pending jobs' lengths into their keys' windows, in finish order."""
        self._sync()
        new = self._pending_ring
        if not new:
            return
        e = self._e
        rows = self.key_rows(np.asarray(new, dtype=np.int64)).tolist()  # may grow the ring
        ring, filled = self._ring, self._filled
        for j, job_rows in zip(new, rows, strict=True):
            job = e.jobs[j]
            work = float(job.iterations * job.compute_s)
            for row in job_rows:
                if row >= 0:
                    ring[row, filled[row] % KEY_WINDOW] = work
                    filled[row] += 1
        new.clear()

    def _sorted_work(self) -> None:
        """``_sync``, then the pending jobs' lengths merged into the pooled sorted array (a new
        array: ones handed out before stay as they were). Only when lengths are read."""
        self._sync()
        if not self._pending_work:
            return
        e = self._e
        work = [float(e.jobs[j].iterations * e.jobs[j].compute_s) for j in self._pending_work]
        self._work = _merged(self._work, work)
        self._arrays.pop(None, None)
        self._pending_work.clear()

    def _sorted_models(self) -> None:
        """``_sync``, then the pending jobs' lengths merged into their models' sorted arrays.
        Only when a model's lengths are read."""
        self._sync()
        if not self._pending_model:
            return
        e = self._e
        by_model: dict[str, list[float]] = {}
        for j in self._pending_model:
            job = e.jobs[j]
            by_model.setdefault(job.model, []).append(float(job.iterations * job.compute_s))
        for m, ws in by_model.items():
            self._by_model[m] = _merged(self._by_model.get(m, _EMPTY), ws)
            self._arrays.pop(m, None)
        self._pending_model.clear()

    def _sorted_service(self) -> None:
        """``_sync``, then the pending jobs' GPU-service into the sorted list (a median reads
        one or two of its elements). Only when GPU-service is read."""
        self._sync()
        e = self._e
        for j in self._pending_service:
            job = e.jobs[j]
            bisect.insort(self._service, float(job.num_gpus * job.iterations * job.compute_s))
        self._pending_service.clear()

    def _row(self, key: Key) -> int:
        row = self._kid.get(key)
        if row is None:
            row = self._kid[key] = len(self._kid) + 1
            if row >= self._ring.shape[0]:
                grow = self._ring.shape[0]
                self._ring = np.vstack((self._ring, np.full((grow, KEY_WINDOW), np.nan)))
                self._filled = np.concatenate((self._filled, np.zeros(grow, dtype=np.int64)))
        return row

    def key_rows(self, jobs: np.ndarray) -> np.ndarray:
        """(len(jobs), len(KEY_LEVELS) + 1): each job's window row per level (``job_keys`` of
        its submission attributes, then row 0, all finished jobs; -1 where it has no such
        key). Computed once per job."""
        rows = self._job_rows[jobs]
        new = rows[:, 0] == -2
        if new.any():
            for j in np.asarray(jobs)[new].tolist():
                spec = self._e.jobs[j]
                keys = job_keys(spec.vc, spec.user, spec.job_name, spec.num_gpus)
                self._job_rows[j] = [-1 if k is None else self._row(k) for k in keys] + [0]
            rows = self._job_rows[jobs]
        return rows

    def key_table(self, jobs: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """(the key windows' ring: one row of ``KEY_WINDOW`` lengths per key, NaN where
        empty; ``jobs``'s rows in it per level, -1 where a job has no such key), brought up
        to date."""
        self._fill_ring()
        rows = self.key_rows(np.asarray(jobs, dtype=np.int64))  # may grow the ring: first
        return self._ring, rows

    def windows(self, jobs: np.ndarray) -> np.ndarray:
        """(len(jobs), len(KEY_LEVELS) + 1, KEY_WINDOW): the latest finished lengths (ideal
        compute seconds; NaN where fewer, and for a level the job has no key at) of each job's
        keys, most specific first, then of all finished jobs."""
        ring, rows = self.key_table(jobs)
        out = ring[np.maximum(rows, 0)]
        out[rows < 0] = np.nan
        return out

    def work_s(self, model: str | None = None) -> tuple[np.ndarray, np.ndarray]:
        """(sorted lengths in ideal compute seconds, their suffix sums with a trailing 0) of
        the finished jobs (of ``model`` only, when given)."""
        if model is None:
            self._sorted_work()
        else:
            self._sorted_models()
        got = self._arrays.get(model)
        if got is None:
            lengths = self._work if model is None else self._by_model.get(model, _EMPTY)
            suffix = np.concatenate((np.cumsum(lengths[::-1])[::-1], [0.0]))
            got = self._arrays[model] = (lengths, suffix)
        return got

    def gpu_service_s(self) -> np.ndarray:
        """Sorted GPU-service (GPUs x iterations x compute per iteration) of finished jobs."""
        self._sorted_service()
        return np.array(self._service)

    def median_gpu_service_s(self) -> float | None:
        """Median GPU-service of the finished jobs; None before the first finishes."""
        self._sorted_service()
        s, n = self._service, len(self._service)
        if n == 0:
            return None
        return s[n // 2] if n % 2 else 0.5 * (s[n // 2 - 1] + s[n // 2])


_EMPTY = np.zeros(0)
_EMPTY.flags.writeable = False


def _merged(sorted_values: np.ndarray, new: list[float]) -> np.ndarray:
    """``sorted_values`` with ``new`` inserted in order (a new array)."""
    if len(new) == 1:  # most reads follow one finish: a slice and a join, not np.insert
        k = int(np.searchsorted(sorted_values, new[0], side="right"))
        return np.concatenate((sorted_values[:k], new, sorted_values[k:]))
    v = np.sort(np.array(new, dtype=np.float64))
    return np.insert(sorted_values, np.searchsorted(sorted_values, v, side="right"), v)


def expected_remaining_work(
    lengths: np.ndarray, suffix: np.ndarray, work: np.ndarray
) -> tuple[np.ndarray, np.ndarray]:
    """(E[L - work | L > work] under the sorted ``lengths``, whether any length exceeds
    ``work``), per element of ``work``; ``suffix`` as from :meth:`History.work_s`."""
    k = np.searchsorted(lengths, work, side="right")
    longer = lengths.size - k
    mean_longer = suffix[k] / np.maximum(longer, 1)
    return mean_longer - work, longer > 0


def _first_level(ok: np.ndarray) -> np.ndarray:
    """The first level where ``ok`` (n, levels) holds, per row; ``levels`` where none does."""
    return np.where(ok.any(axis=1), np.argmax(ok, axis=1), ok.shape[1])


def _keyed_mean(w: np.ndarray, take: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(mean of the ``take``n lengths at each job's first level that takes any, their count,
    that level) from windows ``w`` (:meth:`History.windows`); NaN, 0 and level
    ``len(KEY_LEVELS) + 1`` where no level takes any."""
    count = take.sum(axis=2)
    level = _first_level(count > 0)
    found = level < w.shape[1]
    i, lvl = np.arange(w.shape[0]), np.minimum(level, w.shape[1] - 1)
    n = np.where(found, count[i, lvl], 0)
    total = np.where(take, w, 0.0).sum(axis=2)[i, lvl]
    mean = np.where(n > 0, total / np.maximum(n, 1), np.nan)
    return mean, n, np.where(found, level, len(KEY_LEVELS) + 1)


def keyed_length(history: History, jobs: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(expected length in ideal compute seconds, finished jobs behind it, key level) of each
    of ``jobs`` at submission: the mean of the latest finished lengths of its most specific
    key (``KEY_LEVELS``) that has any, else of the latest finished jobs (level
    ``len(KEY_LEVELS)``); NaN, 0 and level ``len(KEY_LEVELS) + 1`` before any job finished."""
    return _keyed(history, jobs, None)


def keyed_remaining_work(
    history: History, jobs: np.ndarray, work: np.ndarray
) -> tuple[np.ndarray, np.ndarray]:
    """(E[L - work | L > work] over the latest finished lengths L of each job's most specific
    key holding one longer than its ``work`` done (ideal compute seconds), the level used),
    per job; NaN and level ``len(KEY_LEVELS) + 1`` where no finished job is longer."""
    work = np.asarray(work, dtype=np.float64)
    mean, _, level = _keyed(history, jobs, work)
    return mean - work, level


use_kernel = True
"""Compute the keyed means with ``perf.estimate_kernel`` where numba is present (off: the
numpy form; the results are the same bits, tested)."""


def _keyed(
    history: History, jobs: np.ndarray, work: np.ndarray | None
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """``_keyed_mean`` of ``jobs``'s windows over the lengths longer than ``work`` (per job),
    or over every finished length (``work`` None)."""
    jobs = np.asarray(jobs, dtype=np.int64)
    if not (use_kernel and estimate_kernel.keyed is not None):
        w = history.windows(jobs)
        return _keyed_mean(w, ~np.isnan(w) if work is None else w > work[:, None, None])
    ring, rows = history.key_table(jobs)
    m = jobs.size
    mean, count, level = np.empty(m), np.empty(m, dtype=np.int64), np.empty(m, dtype=np.int64)
    by_work = work is not None
    estimate_kernel.keyed(ring, rows, work if by_work else np.zeros(m), by_work, mean, count,
                          level)  # fmt: skip
    return mean, count, level  # no level: rows.shape[1] == len(KEY_LEVELS) + 1


def _remaining_work_one(lengths: np.ndarray, suffix: np.ndarray, work: float) -> float | None:
    """``expected_remaining_work`` of one job, or None where no length exceeds ``work``."""
    k = int(np.searchsorted(lengths, work, side="right"))
    longer = lengths.size - k
    return float(suffix[k]) / longer - work if longer > 0 else None


def remaining_iterations_of(
    history: History,
    compute_s: float,
    done: float,
    *,
    method: str = "history",
    floor_s: float = 0.0,
    model: str | None = None,
    job: int | None = None,
) -> float:
    """:func:`remaining_iterations` of one job (the same float operations, so the same value),
    without building arrays for it: what a policy or an env asks for one job at a time."""
    if method not in METHODS:
        raise ConfigError(f"unknown estimate method {method!r}; allowed: {', '.join(METHODS)}")
    if method == "keyed":
        ids = None if job is None else np.array([job], dtype=np.int64)
        got = remaining_iterations(
            history, np.array([compute_s]), np.array([done]), method=method, floor_s=floor_s,
            jobs=ids,
        )  # fmt: skip
        return float(got[0])
    compute_s, done = float(compute_s), float(done)
    fallback = max(done, floor_s / compute_s)
    if method == "attained" or history.count == 0:
        return fallback
    work = done * compute_s
    rem = _remaining_work_one(*history.work_s(), work)
    out = fallback if rem is None else rem / compute_s
    if method == "model-history":
        if model is None:
            raise ConfigError("method 'model-history' needs the job's model")
        lengths, suffix = history.work_s(model)
        if lengths.size:
            rem = _remaining_work_one(lengths, suffix, work)
            if rem is not None:
                out = rem / compute_s
    return out


def remaining_iterations(
    history: History,
    compute_s: np.ndarray,
    done: np.ndarray,
    *,
    method: str = "history",
    floor_s: float = 0.0,
    models: list[str] | None = None,
    jobs: np.ndarray | None = None,
) -> np.ndarray:
    """Estimated remaining iterations of jobs with per-iteration compute ``compute_s`` that
    have done ``done`` iterations (see the module docstring for the methods; ``models``, the
    jobs' model names, is needed by ``"model-history"``, ``jobs``, their ids, by
    ``"keyed"``)."""
    compute_s = np.asarray(compute_s, dtype=np.float64)
    done = np.asarray(done, dtype=np.float64)
    fallback = np.maximum(done, floor_s / compute_s)
    if method == "attained" or history.count == 0:
        return fallback
    work = done * compute_s
    if method == "keyed":
        if jobs is None:
            raise ConfigError("method 'keyed' needs the jobs' ids")
        rem, _ = keyed_remaining_work(history, jobs, work)
        return np.where(np.isnan(rem), fallback, rem / compute_s)
    rem, has = expected_remaining_work(*history.work_s(), work)
    out = np.where(has, rem / compute_s, fallback)
    if method == "model-history":
        if models is None:
            raise ConfigError("method 'model-history' needs the jobs' models")
        for model in set(models):
            lengths, suffix = history.work_s(model)
            if lengths.size == 0:
                continue
            idx = np.flatnonzero(np.asarray(models) == model)
            r, h = expected_remaining_work(lengths, suffix, work[idx])
            out[idx] = np.where(h, r / compute_s[idx], out[idx])
    return out

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
"""

from __future__ import annotations

import bisect

import numpy as np

from dlcluster_gym.errors import ConfigError
from dlcluster_gym.sim.state import EngineState

METHODS: tuple[str, ...] = ("attained", "history", "model-history")


class History:
    """The finished jobs (``view.history``): ids in finish order, and their lengths sorted.

    Lengths are in seconds of ideal compute (iterations x compute per iteration, no
    communication), GPU-service in GPU-seconds of ideal compute (x GPUs). The sorted arrays
    are built once per newly finished job."""

    def __init__(self, engine: EngineState) -> None:
        self._e = engine
        self._seen = 0
        self._work: list[float] = []
        self._service: list[float] = []
        self._by_model: dict[str, list[float]] = {}
        self._arrays: dict[str | None, tuple[np.ndarray, np.ndarray]] = {}

    @property
    def count(self) -> int:
        """Jobs finished so far."""
        return len(self._e.finished_order)

    def jobs(self) -> np.ndarray:
        """Finished job ids, in the order they finished."""
        return np.asarray(self._e.finished_order, dtype=np.int64)

    def _sync(self) -> None:
        order = self._e.finished_order
        if self._seen == len(order):
            return
        e = self._e
        for j in order[self._seen :]:
            job = e.jobs[j]
            work = float(job.iterations * job.compute_s)
            bisect.insort(self._work, work)
            bisect.insort(self._service, float(job.num_gpus * job.iterations * job.compute_s))
            bisect.insort(self._by_model.setdefault(job.model, []), work)
        self._seen = len(order)
        self._arrays.clear()

    def work_s(self, model: str | None = None) -> tuple[np.ndarray, np.ndarray]:
        """(sorted lengths in ideal compute seconds, their suffix sums with a trailing 0) of
        the finished jobs (of ``model`` only, when given)."""
        self._sync()
        got = self._arrays.get(model)
        if got is None:
            lengths = np.array(self._work if model is None else self._by_model.get(model, []))
            suffix = np.concatenate((np.cumsum(lengths[::-1])[::-1], [0.0]))
            got = self._arrays[model] = (lengths, suffix)
        return got

    def gpu_service_s(self) -> np.ndarray:
        """Sorted GPU-service (GPUs x iterations x compute per iteration) of finished jobs."""
        self._sync()
        return np.array(self._service)

    def median_gpu_service_s(self) -> float | None:
        """Median GPU-service of the finished jobs; None before the first finishes."""
        self._sync()
        s, n = self._service, len(self._service)
        if n == 0:
            return None
        return s[n // 2] if n % 2 else 0.5 * (s[n // 2 - 1] + s[n // 2])


def expected_remaining_work(
    lengths: np.ndarray, suffix: np.ndarray, work: np.ndarray
) -> tuple[np.ndarray, np.ndarray]:
    """(E[L - work | L > work] under the sorted ``lengths``, whether any length exceeds
    ``work``), per element of ``work``; ``suffix`` as from :meth:`History.work_s`."""
    k = np.searchsorted(lengths, work, side="right")
    longer = lengths.size - k
    mean_longer = suffix[k] / np.maximum(longer, 1)
    return mean_longer - work, longer > 0


def remaining_iterations(
    history: History,
    compute_s: np.ndarray,
    done: np.ndarray,
    *,
    method: str = "history",
    floor_s: float = 0.0,
    models: list[str] | None = None,
) -> np.ndarray:
    """Estimated remaining iterations of jobs with per-iteration compute ``compute_s`` that
    have done ``done`` iterations (see the module docstring for the methods; ``models``, the
    jobs' model names, is needed by ``"model-history"``)."""
    compute_s = np.asarray(compute_s, dtype=np.float64)
    done = np.asarray(done, dtype=np.float64)
    fallback = np.maximum(done, floor_s / compute_s)
    if method == "attained" or history.count == 0:
        return fallback
    work = done * compute_s
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

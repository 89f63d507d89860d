"""The finished-job history's lazy structures and the one-job estimate.

``History`` takes finished jobs into each structure (pooled lengths, per-model lengths,
GPU-service, key windows) only when that structure is read; ``remaining_iterations_of`` is
``remaining_iterations`` for one job without arrays. Both must give the values the eager,
array forms give, bit for bit, whatever the order of finishes and reads.
"""

from __future__ import annotations

from types import SimpleNamespace

import numpy as np
import pytest

from dlcluster_gym.errors import ConfigError
from dlcluster_gym.sim.estimators import (
    METHODS,
    History,
    keyed_length,
    remaining_iterations,
    remaining_iterations_of,
)
from dlcluster_gym.workload.job import Job

MODELS = ("resnet", "bert", "gpt")


def _jobs(n: int, seed: int) -> list[Job]:
    """``n`` jobs with lengths drawn from few values (ties are common), three models, and
    users, job names and VCs from small sets."""
    rng = np.random.default_rng(seed)
    out = []
    for i in range(n):
        out.append(Job(
            i, MODELS[int(rng.integers(3))], int(2 ** rng.integers(0, 4)),
            float(rng.choice([50.0, 100.0, 100.0, 400.0, 1500.0, 9000.0])),
            float(rng.choice([0.1, 0.25, 1.0])), 0.0,
            vc=str(rng.choice(["a", "b", ""])), user=str(rng.choice(["u", "v", ""])),
            job_name=str(rng.choice(["x", "y", ""])),
        ))  # fmt: skip
    return out


def _history(jobs: list[Job], finished: list[int]) -> History:
    return History(SimpleNamespace(finished_order=finished, jobs=jobs))


@pytest.mark.parametrize("seed", range(6))
def test_lazy_structures_match_a_history_built_at_the_end(seed: int) -> None:
    """Finishes arrive in batches of 1-4; after each batch a random subset of the structures
    is read. At every point each structure equals a fresh History's over the same finishes."""
    jobs = _jobs(60, seed)
    rng = np.random.default_rng(100 + seed)
    order = rng.permutation(50).tolist()  # jobs 50-59 never finish
    finished: list[int] = []
    lazy = _history(jobs, finished)
    open_jobs = np.arange(50, 60)
    while order:
        for _ in range(int(rng.integers(1, 5))):
            if order:
                finished.append(order.pop())
        fresh = _history(jobs, list(finished))
        reads = rng.random(4) < 0.5
        if reads[0]:
            for a, b in zip(lazy.work_s(), fresh.work_s(), strict=True):
                np.testing.assert_array_equal(a, b)
        if reads[1]:
            m = MODELS[int(rng.integers(3))]
            for a, b in zip(lazy.work_s(m), fresh.work_s(m), strict=True):
                np.testing.assert_array_equal(a, b)
        if reads[2]:
            np.testing.assert_array_equal(lazy.gpu_service_s(), fresh.gpu_service_s())
            assert lazy.median_gpu_service_s() == fresh.median_gpu_service_s()
        if reads[3]:
            got = keyed_length(lazy, open_jobs)
            for a, b in zip(got, keyed_length(fresh, open_jobs), strict=True):
                np.testing.assert_array_equal(a, b)
            assert (got[1] >= 1).all()  # every job has at least the all-jobs window
    assert lazy.count == 50


@pytest.mark.parametrize("method", METHODS)
@pytest.mark.parametrize("seed", range(4))
def test_one_job_estimate_is_the_array_estimate(method: str, seed: int) -> None:
    """``remaining_iterations_of`` equals ``remaining_iterations``'s element, bit for bit:
    before any finish, below, between and beyond every finished length, for every method."""
    jobs = _jobs(80, seed)
    rng = np.random.default_rng(200 + seed)
    finished: list[int] = []
    h = _history(jobs, finished)
    pending = rng.permutation(60).tolist()
    for step in range(25):
        if step:  # the first round reads an empty history
            for _ in range(int(rng.integers(1, 4))):
                finished.append(pending.pop())
        ids = rng.integers(60, 80, size=6)
        compute = np.array([jobs[j].compute_s for j in ids.tolist()])
        done = rng.choice([0.0, 10.0, 99.0, 100.0, 250.0, 1e5], size=6)
        models = [jobs[j].model for j in ids.tolist()]
        want = remaining_iterations(h, compute, done, method=method, floor_s=30.0,
                                    models=models, jobs=ids)  # fmt: skip
        for k, j in enumerate(ids.tolist()):
            got = remaining_iterations_of(h, compute[k], done[k], method=method, floor_s=30.0,
                                          model=models[k], job=j)  # fmt: skip
            assert isinstance(got, float)
            assert got == want[k], (method, step, k)


def test_one_job_estimate_rejects_an_unknown_method() -> None:
    h = _history(_jobs(3, 0), [0, 1])
    with pytest.raises(ConfigError, match=r"unknown estimate method 'median'.*allowed"):
        remaining_iterations_of(h, 1.0, 5.0, method="median")
    with pytest.raises(ConfigError, match="model-history"):
        remaining_iterations_of(h, 1.0, 5.0, method="model-history")

"""Gavel's LPs at trace scale: the sparse constraint matrices equal the dense ones entry for
entry (so HiGHS solves the same problem), and a round whose active jobs did not change
reuses the last allocation with the same results."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
import yaml
from scipy import sparse

from dlcluster_gym import simulate
from dlcluster_gym.baselines import gavel as G

CONFIGS = Path(__file__).resolve().parents[1] / "configs" / "scenarios"


def _dense_base(thr, demand, caps, extra=0):
    """The dense form of ``_base`` (the reference)."""
    J, K = thr.shape
    n = J * K + extra
    rows_job = np.zeros((J, n))
    for j in range(J):
        rows_job[j, j * K : (j + 1) * K] = 1.0
    rows_type = np.zeros((K, n))
    for k in range(K):
        rows_type[k, k : J * K : K] = demand
    return np.vstack((rows_job, rows_type))


def _dense_job_rows(vals, n, keep, last=0.0):
    J, K = vals.shape
    rows = np.zeros((J, n))
    for j in range(J):
        rows[j, j * K : (j + 1) * K] = vals[j]
    if last:
        rows[:, -1] = last
    return rows[keep]


def _same_csc(dense: np.ndarray, got: sparse.csr_array) -> None:
    want, have = sparse.csc_array(dense), sparse.csc_array(got)
    assert want.shape == have.shape
    np.testing.assert_array_equal(want.indptr, have.indptr)
    np.testing.assert_array_equal(want.indices, have.indices)
    np.testing.assert_array_equal(want.data, have.data)


@pytest.mark.parametrize("seed", [0, 1, 2])
@pytest.mark.parametrize("extra", [0, 1])
def test_sparse_lp_rows_equal_the_dense_matrix(seed, extra):
    rng = np.random.default_rng(seed)
    J, K = 9, 3
    thr = rng.uniform(0.0, 2.0, (J, K))
    thr[rng.random((J, K)) < 0.3] = 0.0  # jobs that cannot run on some types
    demand = rng.choice([1, 2, 4, 8], J)
    caps = np.array([8, 4, 16])
    keep = rng.random(J) < 0.6
    n = J * K + extra
    parts, b, bounds = G._base(thr, demand, caps, extra)
    assert b.size == J + K and bounds.shape == (n, 2)
    _same_csc(_dense_base(thr, demand, caps, extra), G._matrix(parts, b.size, n))
    coef = -thr * demand[:, None]  # zeros where a job cannot run
    parts.append(G._job_rows(coef, n, b.size, keep, last=1.0 if extra else 0.0))
    rows = int(b.size + keep.sum())
    dense = np.vstack(
        (_dense_base(thr, demand, caps, extra), _dense_job_rows(coef, n, keep, 1.0 if extra else 0))
    )
    _same_csc(dense, G._matrix(parts, rows, n))


def _small(name: str, jobs: int) -> dict:
    data = yaml.safe_load((CONFIGS / f"{name}.yaml").read_text())
    data["workload"]["num_jobs"] = jobs
    data["name"] = f"{name}-{jobs}"
    return data


@pytest.mark.parametrize("policy", ["gavel-las", "gavel"])
def test_rounds_with_the_same_jobs_reuse_the_allocation(policy, monkeypatch):
    calls: list[int] = []
    orig = G.Gavel._allocation_of

    def counted(self, view, active):
        calls.append(int(active.tobytes() == self._last_active))
        return orig(self, view, active)

    monkeypatch.setattr(G.Gavel, "_allocation_of", counted)
    scenario = _small("gavel-continuous-multiple", 60)
    reused = simulate(scenario, policy, seed=2)
    assert sum(calls) > 10  # rounds that found the same active jobs
    monkeypatch.setattr(G.Gavel, "allocation_by_jobs", False)
    fresh = simulate(scenario, policy, seed=2)
    for key, col in reused.jobs.items():
        np.testing.assert_array_equal(col, fresh.jobs[key], err_msg=key)
    assert {k: v for k, v in reused.summary.items() if k != "wall_s"} == {
        k: v for k, v in fresh.summary.items() if k != "wall_s"
    }


def test_finish_time_fairness_recomputes_every_round():
    assert G.GavelFTF.allocation_by_jobs is False
    assert G.GavelLAS.allocation_by_jobs and G.Gavel.allocation_by_jobs

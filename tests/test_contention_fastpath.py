"""The fast ``link_stretch`` (packed phases, cached circle layouts, the compiled sweep of
``perf.stretch_kernel``) gives bit-identical factors to the implementation it replaced, kept
here verbatim as the oracle (issue 15 Speed: "fix it with results bit-identical"). Both paths
are checked: the compiled one (numba) and the numpy one it falls back to."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import pytest

from dlcluster_gym.perf import contention
from dlcluster_gym.perf.contention import (
    _RTOL,
    DEFAULT_MAX_SECTORS,
    UP_TEMPLATES,
    LinkPhases,
    _precision,
    circle_layout,
    link_stretch,
)


def reference_link_stretch(
    iteration_s: Sequence[float] | np.ndarray,
    up_s: Sequence[float] | np.ndarray,
    shift_s: Sequence[float] | np.ndarray,
    phases: Sequence[LinkPhases],
    capacity_Bps: float,
    *,
    max_sectors: int = DEFAULT_MAX_SECTORS,
) -> np.ndarray:
    """The pre-issue-15-speed-up implementation, kept verbatim as the oracle."""
    it = np.asarray(iteration_s, dtype=np.float64)
    up = np.minimum(np.maximum(np.asarray(up_s, dtype=np.float64), 0.0), it)
    shift = np.asarray(shift_s, dtype=np.float64)
    n = it.size
    ones = np.ones(n)
    if n < 2:
        return ones
    cap = float(capacity_Bps)
    if sum(min(ph.peak, cap) for ph in phases) <= cap * (1.0 + _RTOL):
        return ones  # fast path: the link is never over-subscribed
    layout = circle_layout(it, _precision(it), max_sectors)
    perimeter = layout.perimeter_sectors * layout.sector_s
    job_k = np.concatenate([np.full(ph.rate.size, j) for j, ph in enumerate(phases)])
    down = np.concatenate([ph.down for ph in phases])
    upf = np.concatenate([ph.up for ph in phases])
    share = np.concatenate([ph.length for ph in phases])
    dm = np.minimum(np.concatenate([ph.rate for ph in phases]), cap) / cap
    fl = np.maximum(np.concatenate([ph.flows for ph in phases]), 1.0)
    keep = (dm > 0) & (share > 0)
    job_k, down, upf, share, dm, fl = (a[keep] for a in (job_k, down, upf, share, dm, fl))
    sectors = np.asarray(layout.iteration_sectors, dtype=np.int64)
    length = sectors * layout.sector_s
    scale_j = length / it  # each job's pattern is stretched onto its quantised iteration
    scale = scale_j[job_k]
    t_k, u_k = it[job_k], up[job_k]
    st = (down * (t_k - u_k) + upf * u_k + (shift % it)[job_k]) * scale
    du = share * u_k * scale
    reps_j = layout.perimeter_sectors // sectors
    reps = reps_j[job_k]
    row = np.repeat(np.arange(job_k.size), reps)
    nth = np.arange(row.size) - np.repeat(np.cumsum(reps) - reps, reps)
    starts = np.fmod(st[row] + length[job_k][row] * nth, perimeter)
    ends = starts + du[row]
    dem, flo, who = dm[row], fl[row], job_k[row]
    wrap = ends > perimeter  # phases that wrap past the perimeter continue at 0
    lo = np.concatenate((starts, np.zeros(int(wrap.sum()))))
    hi = np.concatenate((np.minimum(ends, perimeter), ends[wrap] - perimeter))
    dem = np.concatenate((dem, dem[wrap]))
    flo = np.concatenate((flo, flo[wrap]))
    who = np.concatenate((who, who[wrap]))
    points = np.unique(np.concatenate((lo, hi, [0.0, perimeter])))
    i_lo = np.searchsorted(points, lo)
    i_hi = np.searchsorted(points, hi)
    m = points.size
    at = np.concatenate((i_lo * n + who, i_hi * n + who))
    demand = np.bincount(at, np.concatenate((dem, -dem)), m * n).reshape(m, n)
    flows = np.bincount(at, np.concatenate((flo, -flo)), m * n).reshape(m, n)
    demand = np.cumsum(demand, axis=0)[:-1]
    flows = np.rint(np.cumsum(flows, axis=0)[:-1] * 1e6) / 1e6
    demand[flows <= 0] = 0.0
    seg = np.diff(points)
    over = demand.sum(axis=1) > 1.0 + _RTOL
    if not over.any():
        return ones
    d_all, f_all = demand[over], flows[over]
    with np.errstate(divide="ignore", invalid="ignore"):
        per_flow = np.where(f_all > 0, d_all / f_all, np.inf)
    level = reference_water_level(per_flow, f_all, 1.0)
    with np.errstate(divide="ignore", invalid="ignore"):
        slow = np.where(f_all > 0, np.maximum(per_flow / level[:, None] - 1.0, 0.0), 0.0)
    extra_q = (slow * seg[over][:, None]).sum(axis=0)  # quantised seconds over the circle
    extra = extra_q / scale_j / reps_j  # seconds per iteration
    with np.errstate(divide="ignore", invalid="ignore"):
        out = np.where(up > 0, 1.0 + extra / up, 1.0)
    out[out < 1.0 + _RTOL] = 1.0
    return out


def reference_water_level(per_flow: np.ndarray, flows: np.ndarray, capacity: float) -> np.ndarray:
    """The pre-issue-15-speed-up implementation, kept verbatim as the oracle."""
    order = np.argsort(per_flow, axis=1, kind="stable")
    d = np.take_along_axis(per_flow, order, axis=1)
    f = np.take_along_axis(flows, order, axis=1)
    fin = np.where(np.isfinite(d), d, 0.0)
    before = np.cumsum(fin * f, axis=1) - fin * f  # demand of the flows below position i
    after = np.cumsum(f[:, ::-1], axis=1)[:, ::-1]  # flows at positions >= i
    with np.errstate(divide="ignore", invalid="ignore"):
        lam = (capacity - before) / after
    ok = (after > 0) & (lam <= d * (1.0 + 1e-12))
    first = np.argmax(ok, axis=1)
    return lam[np.arange(lam.shape[0]), first]


def random_phases(rng: np.random.Generator, parallelism: str) -> LinkPhases:
    """A data-parallel job's one or two stages on a link, or a model-parallel template."""
    if parallelism == "model":
        tpl = UP_TEMPLATES["model"]
        k = len(tpl.level)
        rate = rng.uniform(0.1, 1.5)
        return LinkPhases(
            np.asarray(tpl.down), np.asarray(tpl.up), np.asarray(tpl.share),
            np.asarray(tpl.level) * rate, np.full(k, float(rng.integers(1, 4))),
        )  # fmt: skip
    k = int(rng.integers(1, 3))
    length = rng.uniform(0.05, 0.6, k)
    start = np.cumsum(np.r_[rng.uniform(0.0, 0.2), length[:-1]])
    rate = rng.uniform(0.05, 1.6, k)
    if rng.random() < 0.1:
        rate[0] = 0.0  # a stage that moves nothing on this link
    return LinkPhases(np.ones(k), start, length, rate, rng.integers(1, 5, k).astype(float))


@pytest.fixture(params=["compiled", "numpy"])
def path(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> str:
    """Run a test on the compiled sweep and on the numpy path."""
    if request.param == "compiled" and contention._stretch is None:
        pytest.skip("numba is not installed: no compiled sweep")
    if request.param == "numpy":
        monkeypatch.setattr(contention, "_stretch", None)
    return request.param


@pytest.mark.parametrize("seed", range(40))
def test_fast_link_stretch_is_bit_identical_to_the_reference(seed: int, path: str) -> None:
    rng = np.random.default_rng(seed)
    for _ in range(25):
        n = int(rng.integers(2, 12) if seed % 4 else rng.integers(2, 40))
        iters = rng.uniform(0.05, 3.0, n)
        if rng.random() < 0.3:
            iters[:] = iters[0]  # identical jobs: aligned phases
        ups = iters * rng.uniform(0.05, 1.0, n)
        shifts = rng.uniform(-1.0, 2.0, n) * (rng.random() < 0.5)
        par = ["model" if rng.random() < 0.2 else "data" for _ in range(n)]
        phases = [random_phases(rng, p) for p in par]
        cap = float(rng.uniform(0.5, 2.0))
        sectors = int(rng.choice([64, 256, DEFAULT_MAX_SECTORS]))
        got = link_stretch(iters, ups, shifts, phases, cap, max_sectors=sectors)
        want = reference_link_stretch(iters, ups, shifts, phases, cap, max_sectors=sectors)
        assert np.array_equal(got, want), (seed, got, want)
        assert (got >= 1.0).all()


def test_many_jobs_beyond_one_summation_block_stay_bit_identical(path: str) -> None:
    """Above 128 jobs on a link (one pairwise-summation block) the numpy path runs."""
    rng = np.random.default_rng(7)
    n = 130
    iters = np.full(n, 0.4)
    ups = iters * rng.uniform(0.2, 0.9, n)
    phases = [random_phases(rng, "data") for _ in range(n)]
    got = link_stretch(iters, ups, np.zeros(n), phases, 1.0)
    want = reference_link_stretch(iters, ups, np.zeros(n), phases, 1.0)
    assert np.array_equal(got, want)
    assert (got > 1.0).any()


def test_kernel_row_sum_is_numpys_pairwise_sum() -> None:
    """The compiled over-subscription test adds a row as ``ndarray.sum(axis=1)`` does."""
    from dlcluster_gym.perf.stretch_kernel import HAVE_NUMBA, MAX_JOBS, _row_sum

    if not HAVE_NUMBA:
        pytest.skip("numba is not installed: no compiled sweep")
    rng = np.random.default_rng(1)
    for n in range(1, MAX_JOBS + 1):
        rows = rng.uniform(0.0, 1.0, (20, n)) * 10.0 ** rng.integers(-8, 8, (20, n))
        want = rows.sum(axis=1)
        got = [_row_sum(np.ascontiguousarray(r), n) for r in rows]
        assert np.array_equal(got, want), n

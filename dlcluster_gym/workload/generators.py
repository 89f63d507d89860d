"""Synthetic workload generators (batch and Poisson arrivals, Dally-style and generic jobs).

Every generator takes an explicit ``numpy.random.Generator``; none touches global random state.

The generators know no cluster and no network: they take the cluster's GPU count (for the
arrival rate that offers a load) as a number and give each job its length as they draw it,
a duration in seconds or an iteration count. A drawn duration is the job's run time "at packed
consolidation", on the most consolidated placement (fill machines, then racks) of the
cluster's first machine group; ``dlcluster_gym.scenario.sizing`` turns it into iterations,
``duration / (compute_s x (1 + comm_overhead(profile, packed shape, links)))``.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from dlcluster_gym import numerics
from dlcluster_gym.errors import ConfigError
from dlcluster_gym.workload.groups import GroupAssignment, GroupSpec, assign_groups
from dlcluster_gym.workload.job import Job
from dlcluster_gym.workload.models import DALLY_MODELS
from dlcluster_gym.workload.profiles import model_profile

# --------------------------------------------------------------------------- fitted constants
#
# Dally-style job mix fitted to the real multi-GPU jobs of the public traces in ../shared/traces
# by ``fit_dally_distributions`` (re-run: ``python experiments/workloads/fit_dally_workload.py``).
#   Files: pollux_adaptdl/traces/philly.csv (Philly, Sep-Dec 2017) and
#          elasticflow_itp/raw/cluster01..10.csv (Microsoft ITP, Mar-May 2021).
#   Filter: num_gpus >= 2 and duration >= 600 s (the ITP traces hold only jobs of >= 10 min;
#           the same floor is applied to Philly); demands rounded up to a power of two;
#           jobs needing more than 64 GPUs after rounding dropped (3 Philly jobs of 128).
#   Jobs kept: FIT_NUM_JOBS_PHILLY from Philly, FIT_NUM_JOBS_ITP from ITP; each source is
#           weighted equally (each job of a source gets weight 0.5 / that source's job count).
#   Demand: the weighted frequency of each power of two.
#   Duration: independent of the demand (per-demand medians show no monotone trend); weighted
#           empirical quantiles of the duration winsorized at its 1st and 99th percentiles, at
#           the levels DALLY_DURATION_LEVELS; sampled by linear interpolation of log(duration).
FIT_NUM_JOBS_PHILLY = 3338
FIT_NUM_JOBS_ITP = 11669
DALLY_GPU_DEMANDS: tuple[int, ...] = (2, 4, 8, 16, 32, 64)
DALLY_DEMAND_PROBS: tuple[float, ...] = (0.113, 0.3189, 0.5016, 0.0382, 0.0246, 0.0036)
DALLY_DURATION_LEVELS: tuple[float, ...] = (
    0.0, 0.05, 0.1, 0.15, 0.2, 0.25, 0.3, 0.35, 0.4, 0.45, 0.5,
    0.55, 0.6, 0.65, 0.7, 0.75, 0.8, 0.85, 0.9, 0.95, 0.99, 1.0,
)  # fmt: skip
# Median 6.6 h; mean 24.1 h (``dally_mean_duration_s``).
DALLY_DURATION_QUANTILES_S: tuple[float, ...] = (
    663.0, 928.0, 1815.0, 2927.0, 3867.0, 5423.0, 7681.0, 11178.0, 14028.0, 18187.0, 23641.0,
    31286.0, 42137.0, 57155.0, 77689.0, 96743.0, 129085.0, 174753.0, 221704.0, 371606.0,
    868188.0, 869012.0,
)  # fmt: skip

FIT_MIN_DURATION_S = 600.0
FIT_MAX_GPUS = 64


# --------------------------------------------------------------------------- fitting


@dataclass(frozen=True)
class DallyFit:
    """Result of fitting the Dally-style job mix to traces."""

    num_jobs_philly: int
    num_jobs_itp: int
    demands: tuple[int, ...]
    demand_probs: tuple[float, ...]
    duration_levels: tuple[float, ...]
    duration_quantiles_s: tuple[float, ...]


def _weighted_quantiles(x: np.ndarray, w: np.ndarray, levels: Sequence[float]) -> np.ndarray:
    order = np.argsort(x, kind="stable")
    xs, ws = x[order], w[order]
    cdf = (np.cumsum(ws) - 0.5 * ws) / ws.sum()  # midpoint rule
    return np.interp(levels, cdf, xs)


def fit_dally_distributions(traces_dir: str | Path | None = None) -> DallyFit:
    """Fit the demand pmf and duration quantile table (see the constants' comment)."""
    from dlcluster_gym.workload import traces as tr

    def keep(g: np.ndarray, d: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        g2 = np.exp2(np.ceil(np.log2(g))).astype(np.int64)
        m = (g >= 2) & (d >= FIT_MIN_DURATION_S) & (g2 <= FIT_MAX_GPUS)
        return g2[m], d[m]

    ph = tr.load_philly(tr.PHILLY_CSV, traces_dir)
    g_ph, d_ph = keep(ph.num_gpus, ph.duration_s)
    root = tr.trace_root(traces_dir) / tr.ITP_RAW_DIR
    files = sorted(root.glob("cluster*.csv"))
    if not files:
        raise FileNotFoundError(f"no ITP raw cluster files under {root}")
    parts = [tr.load_itp_raw(f) for f in files]
    g_itp, d_itp = keep(
        np.concatenate([p.num_gpus for p in parts]), np.concatenate([p.duration_s for p in parts])
    )
    g = np.concatenate([g_ph, g_itp])
    d = np.concatenate([d_ph, d_itp])
    w = np.concatenate([np.full(g_ph.size, 0.5 / g_ph.size), np.full(g_itp.size, 0.5 / g_itp.size)])
    probs = [float(w[g == k].sum()) for k in DALLY_GPU_DEMANDS]
    lo, hi = _weighted_quantiles(d, w, [0.01, 0.99])
    q = _weighted_quantiles(np.clip(d, lo, hi), w, DALLY_DURATION_LEVELS)
    return DallyFit(
        num_jobs_philly=int(g_ph.size),
        num_jobs_itp=int(g_itp.size),
        demands=DALLY_GPU_DEMANDS,
        demand_probs=tuple(round(p, 4) for p in probs),
        duration_levels=DALLY_DURATION_LEVELS,
        duration_quantiles_s=tuple(float(round(v)) for v in q),
    )


# --------------------------------------------------------------------------- arrivals


def batch_arrivals(n: int) -> np.ndarray:
    """``n`` arrivals, all at t = 0."""
    return np.zeros(int(n), dtype=np.float64)


def poisson_arrivals(n: int, rate_per_hour: float, rng: np.random.Generator) -> np.ndarray:
    """``n`` arrival times (s) of a Poisson process of the given rate starting at t = 0."""
    if not (math.isfinite(rate_per_hour) and rate_per_hour > 0):
        raise ConfigError(f"rate_per_hour must be finite and > 0, got {rate_per_hour!r}")
    gaps = rng.exponential(3600.0 / rate_per_hour, size=int(n))
    return np.cumsum(gaps)


def rate_for_load(load: float, num_gpus: int, mean_gpu_seconds: float) -> float:
    """Poisson rate (jobs/hour) that offers ``load`` of a cluster's GPUs.

    rate = load x num_gpus / E[num_gpus x run time], where run time is the job's run time at
    packed consolidation, so ``load`` = 1 keeps every GPU busy on average.
    """
    if not (math.isfinite(load) and load > 0):
        raise ConfigError(f"load must be finite and > 0, got {load!r}")
    if not (math.isfinite(mean_gpu_seconds) and mean_gpu_seconds > 0):
        raise ConfigError(f"E[num_gpus x run time] must be > 0, got {mean_gpu_seconds!r}")
    return load * num_gpus / mean_gpu_seconds * 3600.0


def make_arrivals(
    n: int,
    arrival: str,
    rng: np.random.Generator,
    *,
    num_gpus: int,
    mean_gpu_seconds: float | None,
    load: float | None = None,
    rate_per_hour: float | None = None,
) -> np.ndarray:
    """Batch (all at 0) or Poisson arrivals; Poisson uses ``rate_per_hour`` if given, else the
    rate for offered ``load`` (see :func:`rate_for_load`; ``mean_gpu_seconds`` may be None
    only when that rate is not needed)."""
    if arrival == "batch":
        return batch_arrivals(n)
    if arrival != "poisson":
        raise ConfigError(f"unknown arrival process {arrival!r}; known: batch, poisson")
    if rate_per_hour is None:
        if load is None:
            raise ConfigError("Poisson arrivals need rate_per_hour or load")
        if mean_gpu_seconds is None:
            raise ValueError(
                "Poisson arrivals at an offered load need E[num_gpus x run time] "
                "(mean_gpu_seconds); synthetic_jobs gets it from iteration_times"
            )
        rate_per_hour = rate_for_load(load, num_gpus, mean_gpu_seconds)
    return poisson_arrivals(n, rate_per_hour, rng)


# --------------------------------------------------------------------------- Dally-style jobs


def sample_dally_demands(n: int, rng: np.random.Generator) -> np.ndarray:
    """GPU demands (powers of two, 2..64) from the fitted pmf."""
    p = np.asarray(DALLY_DEMAND_PROBS) / sum(DALLY_DEMAND_PROBS)
    return np.asarray(DALLY_GPU_DEMANDS, dtype=np.int64)[rng.choice(len(p), size=int(n), p=p)]


def dally_duration_quantile(u: np.ndarray) -> np.ndarray:
    """Run times (s, at packed consolidation) at quantile levels ``u`` of the fitted table
    (log-linear between table points)."""
    logq = numerics.log(DALLY_DURATION_QUANTILES_S)
    return numerics.exp(np.interp(u, DALLY_DURATION_LEVELS, logq))


def sample_dally_durations(n: int, rng: np.random.Generator) -> np.ndarray:
    """Run times (s, at packed consolidation) from the fitted quantile table."""
    return dally_duration_quantile(rng.random(int(n)))


def dally_mean_duration_s() -> float:
    """Exact mean of the fitted duration distribution (log-linear between table points)."""
    u = np.asarray(DALLY_DURATION_LEVELS)
    x = np.asarray(DALLY_DURATION_QUANTILES_S)
    total = 0.0
    for k in range(len(u) - 1):
        a, b, du = x[k], x[k + 1], u[k + 1] - u[k]
        total += du * (a if math.isclose(a, b) else (b - a) / math.log(b / a))
    return total


def dally_mean_gpu_seconds() -> float:
    """E[num_gpus x run time] of Dally-style jobs (demand and duration are independent)."""
    p = np.asarray(DALLY_DEMAND_PROBS) / sum(DALLY_DEMAND_PROBS)
    return float(np.dot(p, DALLY_GPU_DEMANDS)) * dally_mean_duration_s()


def dally_jobs(
    num_jobs: int,
    cluster_gpus: int,
    rng: np.random.Generator,
    arrival: str = "batch",
    load: float | None = 0.9,
    rate_per_hour: float | None = None,
    profile: str = "physics",
    groups: GroupSpec | None = None,
) -> list[Job]:
    """Dally-style jobs: model uniform over ``DALLY_MODELS``, fitted demand and run time.

    Each job's length is its sampled run time at packed consolidation (``Job.duration_s``);
    ``scenario.sizing`` turns it into iterations, so a job placed packed runs for exactly its
    sampled duration. ``cluster_gpus`` (the cluster's GPU count) sets the Poisson rate that
    offers ``load``. Jobs are returned in arrival order.

    With ``groups`` (see ``workload.groups``) every job gets a VC, a user and a job name, and
    its run time is the fitted table at a level that carries the VC's and the group's effect;
    the draws of the groups-off generator are made first and unchanged (arrivals included), the
    groups' draws come after them.
    """
    n = int(num_jobs)
    model_idx = rng.integers(len(DALLY_MODELS), size=n)
    demands = sample_dally_demands(n, rng)
    levels = rng.random(n)  # sample_dally_durations, keeping the levels
    durations = dally_duration_quantile(levels)
    arrivals = make_arrivals(
        n,
        arrival,
        rng,
        num_gpus=cluster_gpus,
        mean_gpu_seconds=dally_mean_gpu_seconds(),
        load=load,
        rate_per_hour=rate_per_hour,
    )
    labels = _no_labels(n)
    if groups is not None:
        ga = assign_groups(groups, levels, rng)
        model_idx = _habits(ga, model_idx, rng.integers(len(DALLY_MODELS), size=ga.num_groups))
        demands = _habits(ga, demands, sample_dally_demands(ga.num_groups, rng))
        durations = dally_duration_quantile(ga.u)
        labels = ga.labels()
    profiles = [model_profile(m, profile) for m in DALLY_MODELS]
    jobs = []
    for i in range(n):
        prof, g = profiles[int(model_idx[i])], int(demands[i])
        jobs.append(Job(
            job_id=i, model=prof.name, num_gpus=g, iterations=None,
            duration_s=float(durations[i]), compute_s=prof.compute_s,
            arrival_s=float(arrivals[i]), name=f"{prof.name}-{i}",
            vc=labels[0][i], user=labels[1][i], job_name=labels[2][i],
        ))  # fmt: skip
    return jobs


def _no_labels(n: int) -> tuple[list[str], list[str], list[str]]:
    empty = [""] * n
    return empty, empty, empty


def _habits(ga: GroupAssignment, own: np.ndarray, per_group: np.ndarray) -> np.ndarray:
    """Each job's own draw, or its group's where it follows the group's habit."""
    return np.where(ga.habit, per_group[ga.group], own)


# --------------------------------------------------------------------------- generic synthetic


def _bands(bands: Sequence[tuple[float, float, float]]) -> tuple[np.ndarray, np.ndarray]:
    b = np.asarray(bands, dtype=np.float64).reshape(-1, 3)
    return b[:, :2], b[:, 2] / b[:, 2].sum()


def _log10_draw(
    bands: Sequence[tuple[float, float, float]], n: int, rng: np.random.Generator
) -> tuple[np.ndarray, np.ndarray]:
    """``x`` (log10 minutes) of :func:`log10_minutes`, and the uniform that placed it in its
    band."""
    lohi, w = _bands(bands)
    pick = rng.choice(len(w), size=int(n), p=w)
    r = rng.random(int(n))
    return lohi[pick, 0] + (lohi[pick, 1] - lohi[pick, 0]) * r, r


def log10_minutes(
    bands: Sequence[tuple[float, float, float]], n: int, rng: np.random.Generator
) -> np.ndarray:
    """``n`` durations (s) of ``10^x`` minutes: a band ``[lo, hi, weight]`` drawn by weight,
    ``x`` uniform in it (Gavel's trace generator: [1.5, 3] 80 %, [3, 4] 20 %)."""
    return 60.0 * np.power(10.0, _log10_draw(bands, n, rng)[0])


def _band_cdf(
    bands: Sequence[tuple[float, float, float]], x: np.ndarray, r: np.ndarray
) -> np.ndarray:
    """The bands' distribution function at ``x``, randomized at point masses (a band with
    lo = hi) by the uniform ``r``: P(X < x) + r P(X = x), exactly uniform for x drawn from
    the bands (the probability integral transform)."""
    lohi, w = _bands(bands)
    out = np.zeros_like(x)
    for (lo, hi), wk in zip(lohi.tolist(), w.tolist(), strict=True):
        if hi > lo:
            out += wk * np.clip((x - lo) / (hi - lo), 0.0, 1.0)
        else:
            out += wk * ((x > lo) + r * (x == lo))
    return out


def _band_quantile(bands: Sequence[tuple[float, float, float]], u: np.ndarray) -> np.ndarray:
    """The inverse of the bands' distribution function (piecewise linear between the band
    edges, jumps at point masses) at levels ``u`` in [0, 1]."""
    lohi, w = _bands(bands)
    edges = np.unique(lohi)
    below = np.zeros_like(edges)  # P(X < edge)
    at = np.zeros_like(edges)  # P(X = edge)
    for (lo, hi), wk in zip(lohi.tolist(), w.tolist(), strict=True):
        if hi > lo:
            below += wk * np.clip((edges - lo) / (hi - lo), 0.0, 1.0)
        else:
            below += wk * (edges > lo)
            at += wk * (edges == lo)
    levels = np.column_stack([below, below + at]).ravel()
    return np.interp(u, levels, np.repeat(edges, 2))


def log10_minutes_mean(bands: Sequence[tuple[float, float, float]]) -> float:
    """Exact mean (s) of :func:`log10_minutes`: E[10^x] = (10^hi - 10^lo) / ((hi - lo) ln 10)
    in a band (10^lo when lo = hi)."""
    lohi, w = _bands(bands)
    mean = 0.0
    for (lo, hi), wk in zip(lohi, w, strict=True):
        e = 10.0**lo if hi == lo else (10.0**hi - 10.0**lo) / ((hi - lo) * math.log(10.0))
        mean += wk * e
    return 60.0 * mean


def synthetic_jobs(
    num_jobs: int,
    cluster_gpus: int,
    rng: np.random.Generator,
    *,
    models: Sequence[str] = ("resnet50",),
    gpu_demands: Sequence[int] = (1, 2, 4, 8),
    gpu_demand_weights: Sequence[float] | None = None,
    iterations: tuple[int, int] = (1000, 10000),
    arrival: str = "poisson",
    load: float | None = 0.9,
    rate_per_hour: float | None = None,
    profile: str = "physics",
    log10_duration_min: Sequence[tuple[float, float, float]] | None = None,
    groups: GroupSpec | None = None,
    iteration_times: np.ndarray | None = None,
) -> list[Job]:
    """Jobs with a model uniform over ``models``, a demand from ``gpu_demands`` (weighted),
    and iterations uniform over the integers in ``iterations`` = [lo, hi]; or, with
    ``log10_duration_min`` (bands ``[lo, hi, weight]``), a run time of ``10^x`` minutes at
    packed consolidation (``Job.duration_s``, which ``scenario.sizing`` turns into
    iterations), ``x`` uniform in a band drawn by weight.

    ``cluster_gpus`` (the cluster's GPU count) sets the Poisson rate that offers ``load``.
    For jobs sized in iterations that rate needs their run times: ``iteration_times`` holds
    the packed iteration time of each model (rows, in ``models`` order) at each demand
    (columns, in ``gpu_demands`` order), as ``scenario.sizing.iteration_times`` computes it.

    With ``groups`` (see ``workload.groups``) every job gets a VC, a user and a job name, and
    its run time (with ``log10_duration_min``) or its iteration count (without) is drawn at a
    quantile level that carries the VC's and the group's effect. The groups-off draws are made
    first and unchanged (arrivals included); the groups' draws come after them.
    """
    n = int(num_jobs)
    if not models:
        raise ConfigError("synthetic workload: models must not be empty")
    if not gpu_demands:
        raise ConfigError("synthetic workload: gpu_demands must not be empty")
    lo, hi = int(iterations[0]), int(iterations[1])
    if not 0 < lo <= hi:
        raise ConfigError(f"synthetic workload: iterations must be 0 < lo <= hi, got {iterations}")
    if gpu_demand_weights is None:
        p = np.full(len(gpu_demands), 1.0 / len(gpu_demands))
    else:
        if len(gpu_demand_weights) != len(gpu_demands):
            raise ConfigError(
                f"synthetic workload: {len(gpu_demand_weights)} gpu_demand_weights for "
                f"{len(gpu_demands)} gpu_demands"
            )
        p = np.asarray(gpu_demand_weights, dtype=np.float64)
        p = p / p.sum()
    profiles = [model_profile(m, profile) for m in models]
    if iteration_times is not None:
        it_time = np.asarray(iteration_times, dtype=np.float64)
        if it_time.shape != (len(profiles), len(gpu_demands)):
            raise ValueError(
                f"iteration_times has shape {it_time.shape}; expected one row per model and "
                f"one column per GPU demand, {(len(profiles), len(gpu_demands))}"
            )
    model_idx = rng.integers(len(profiles), size=n)
    demand_idx = rng.choice(len(p), size=n, p=p)
    iters: np.ndarray | None = None  # the length: iterations, or
    durations: np.ndarray | None = None  # a run time (s) at packed consolidation
    if log10_duration_min is None:
        mean_gpu_s = None
        if iteration_times is not None:
            # E[g x run time] = E[iters] x sum_m sum_g P(m) P(g) g t(m, g)
            gpus = p * np.asarray(gpu_demands, dtype=np.float64)
            mean_gpu_s = (lo + hi) / 2.0 * float(np.mean(it_time @ gpus))
        iters = rng.integers(lo, hi + 1, size=n).astype(np.float64)
    else:
        x, placed = _log10_draw(log10_duration_min, n, rng)
        durations = 60.0 * np.power(10.0, x)
        # E[g x run time] = E[g] x E[run time] (demand and duration are independent)
        mean_gpu_s = float(p @ np.asarray(gpu_demands, dtype=np.float64)) * log10_minutes_mean(
            log10_duration_min
        )
    arrivals = make_arrivals(
        n,
        arrival,
        rng,
        num_gpus=cluster_gpus,
        mean_gpu_seconds=mean_gpu_s,
        load=load,
        rate_per_hour=rate_per_hour,
    )
    labels = _no_labels(n)
    if groups is not None:
        span = hi - lo + 1
        if log10_duration_min is None:  # the level of the drawn integer, jittered within it
            levels = (iters - lo + rng.random(n)) / span
        else:
            levels = _band_cdf(log10_duration_min, x, placed)
        ga = assign_groups(groups, levels, rng)
        model_idx = _habits(ga, model_idx, rng.integers(len(profiles), size=ga.num_groups))
        demand_idx = _habits(ga, demand_idx, rng.choice(len(p), size=ga.num_groups, p=p))
        if log10_duration_min is None:
            iters = np.minimum(lo + np.floor(ga.u * span), hi)
        else:
            x = _band_quantile(log10_duration_min, ga.u)
            durations = 60.0 * np.power(10.0, x)
        labels = ga.labels()
    return [
        Job(
            job_id=i,
            model=profiles[model_idx[i]].name,
            num_gpus=int(gpu_demands[demand_idx[i]]),
            iterations=None if iters is None else float(iters[i]),
            duration_s=None if durations is None else float(durations[i]),
            compute_s=profiles[model_idx[i]].compute_s,
            arrival_s=float(arrivals[i]),
            name=f"{profiles[model_idx[i]].name}-{i}",
            vc=labels[0][i],
            user=labels[1][i],
            job_name=labels[2][i],
        )
        for i in range(n)
    ]

"""Cassini's geometric abstraction: unified circles, compatibility scores and time shifts.

Implements Chapter 4 of the Cassini/MLTCP thesis (``shared/papers/cassini-mltcp-thesis.txt``)
and the HotNets'22 sketch of the same idea:

- a job's periodic Up/Down network demand (4.1.1, 4.3) as a :class:`CommProfile`;
- the *unified circle* of the jobs sharing a link, perimeter = LCM of their iteration times
  (4.3.2), discretised into the angle set ``A`` of Table 4.1 (:func:`unified_circle`);
- each job's demand on that circle, rotated (4.3.3, Table 4.1 ``bw_circle_j``) and the
  compatibility score of Table 4.1 (:func:`compatibility_score`);
- the rotation search that maximises the score (4.3.4-4.3.7, :func:`link_compatibility`);
- rotation angle -> time shift, Eq. 4.5 (:func:`rotation_to_time_shift`);
- the bipartite Affinity graph (4.4.1), loop detection and Algorithm 1's BFS that turns the
  per-link shifts into one shift per job (Theorem 1) (:func:`affinity_graph`,
  :func:`has_loop`, :func:`assign_time_shifts`), and one placement candidate of Algorithm 2
  end to end (:func:`placement_compatibility`).

Units. Time is float seconds. Bandwidth is in any unit the caller likes as long as phase
demands and the link capacity use the same one; the default capacity ``1.0`` means demands are
fractions of the link capacity.

Choices the thesis leaves open, made here:

- **Precision.** 4.5.1 uses "5 as the angle discretization precision (Table 4.1)" and the
  thesis measures circle perimeters in time *units* (a 255 ms iteration is "a circle with
  perimeter 255 units"; LCM(40 ms, 60 ms) is "120 units", 4.3-4.3.2). We read the precision as
  the arc length of one discrete angle: every angle of ``A`` covers 5 units = 5 ms of the
  perimeter, so ``|A| = perimeter / 5 ms`` (default ``precision_s = 0.005``). A fixed 5-degree
  step (72 angles) would make one angle of a multi-second LCM circle longer than a whole
  iteration; the per-unit reading keeps the resolution of a time shift at 5 ms whatever the
  perimeter. Callers who want the degree reading can pass ``precision_s = perimeter / 72``.
- **Time quantum for the LCM.** LCMs need integers, so each iteration time ``T_j`` is
  expressed in sectors of the precision: ``n_j = max(1, round(T_j / precision_s))``; the
  perimeter is ``P = lcm(n_j)`` sectors. Job ``j``'s profile is stretched onto exactly ``n_j``
  sectors (each sector holds the *average* demand of its ``T_j / n_j`` slice), which keeps its
  duty cycle and bytes per iteration exact.
- **Perimeter cap.** The exact LCM of unrelated iteration times explodes (4 jobs of 100-300 ms
  can need millions of sectors), so ``P`` is capped at ``max_sectors`` (default 2048 sectors,
  10.24 s at 5 ms). When ``lcm(n_j)`` exceeds the cap we keep the precision and instead pick the
  perimeter ``P <= max_sectors`` for which every job can be given an iteration length ``m_j``
  dividing ``P`` (``m_j`` within ``[n_j/2, 2 n_j]``) with the smallest worst relative change
  ``max_j |m_j - n_j| / n_j``; ties go to the smaller ``P`` and, per job, to the nearer then
  smaller ``m_j``. Each job then repeats exactly ``P / m_j`` times on the circle as 4.3.2
  requires. :attr:`UnifiedCircle.exact` and :attr:`UnifiedCircle.max_rel_error` report the
  approximation; for four random 100-300 ms jobs it changes iteration times by about 4%
  (median; at most about 6% in 300 random draws). A job longer than ``max_sectors`` sectors
  coarsens the precision by the smallest integer factor that makes it fit.
- **Excess tolerance.** Sector averages of exactly complementary phases can sum to
  ``C * (1 + 1e-16)``; a summed excess below ``1e-9 * C * |A|`` counts as none, so fully
  compatible jobs score exactly 1.0.
- **Time shifts** (Eq. 4.5). A rotation of ``r_j`` angles is ``theta_j / (2 pi) * p =
  r_j * precision`` seconds, taken modulo the job's measured iteration time (shifting a
  periodic job by whole iterations changes nothing).
- **Rotation search** (Table 4.1 objective). Rotating every job by the same angle leaves the
  score unchanged, so the first job is fixed at angle 0 and job ``j`` rotates by
  ``r_j in [0, n_j)`` sectors (Eq. 4.4: within its first iteration). Two jobs: exhaustive over
  the second job's ``n_2`` rotations (exact). More jobs: exhaustive when the rotation product
  times ``P`` is at most ``exhaustive_budget`` (exact); otherwise greedy placement followed by
  coordinate descent (each step sets one job to its best rotation given the others, exactly),
  repeated from ``restarts`` seeded random starts, keeping the best; stops early at score 1.
  Every step scores all ``n_j`` rotations of one job at once, in numpy, either densely
  (``n_j * P``) or, for profiles with few distinct levels such as data-parallel jobs, by
  exploiting the ``n_j``-periodicity of the job's tile (``levels * P + n_j**2``).
  On the seeded random cases of ``tests/test_geometry.py`` (3-4 jobs, coarse circles) the
  descent reaches the exhaustive optimum in at least 95% of cases and is never more than
  0.02 below it. Ties go to the lexicographically smallest rotation vector that was found.
- **Jobs that exceed the link alone.** A profile whose peak demand is above the capacity would
  be congested on its own, contradicting the "dedicated cluster" profile of 4.3; it raises
  :class:`~dlcluster_gym.errors.ConfigError`. With that guarantee the score of ``J`` jobs
  lies in ``[min(1, 2 - sum_j peak_j / C), 1]``, hence in ``[2 - J, 1]``: 1 when demand never
  exceeds ``C``, 0 for two always-on full-rate jobs, negative for more (4.3.6 "possible for
  the score to become negative").
- **Zero jobs** on a link: a one-sector circle (``lcm`` of nothing is 1), score 1.0, no
  rotations. Overlapping phases of one profile add up (concurrent flows).
- **Affinity graph.** Nodes are tagged tuples ``("job", id)`` and ``("link", id)`` (so a job
  and a link may share an id), with ``bipartite`` = 0 for jobs and 1 for links; as in
  Algorithm 2 (lines 4-11) only links carrying more than one job and the jobs on them are
  kept. A *loop* is any cycle of that graph; Theorem 1 needs a loop-free graph, so
  :func:`assign_time_shifts` raises :class:`AffinityLoopError` on one (Cassini discards such
  candidates, Algorithm 2 line 13-15). Algorithm 1 picks a random reference job per connected
  subgraph; we take the first job in graph insertion order (deterministic), and visit
  neighbours in insertion order.
"""

from __future__ import annotations

import bisect
import itertools
import math
from collections import deque
from collections.abc import Hashable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from functools import lru_cache
from typing import Any, Literal

import networkx as nx
import numpy as np
from numpy.lib.stride_tricks import sliding_window_view

from dlcluster_gym.errors import ConfigError, DLClusterError

__all__ = [
    "DEFAULT_EXHAUSTIVE_BUDGET",
    "DEFAULT_MAX_SECTORS",
    "DEFAULT_PRECISION_S",
    "DEFAULT_RESTARTS",
    "AffinityLoopError",
    "CommProfile",
    "LinkCompatibility",
    "Phase",
    "PlacementCompatibility",
    "UnifiedCircle",
    "affinity_graph",
    "assign_time_shifts",
    "compatibility_score",
    "find_loop",
    "has_loop",
    "job_demand",
    "link_compatibility",
    "placement_compatibility",
    "rotation_to_time_shift",
    "total_demand",
    "unified_circle",
]

DEFAULT_PRECISION_S = 0.005
"""Arc of one discrete angle in seconds: Cassini's default precision of 5 units (4.5.1)."""
DEFAULT_MAX_SECTORS = 2048
"""Cap on the unified circle's perimeter, in discrete angles (10.24 s at 5 ms)."""
DEFAULT_EXHAUSTIVE_BUDGET = 2_000_000
"""Largest ``prod(n_j, j >= 2) * P`` for which the rotation search is exhaustive."""
DEFAULT_RESTARTS = 4
"""Random restarts of the coordinate descent after the greedy start (seeded)."""

_EXCESS_RTOL = 1e-9
_TIME_RTOL = 1e-9
JOB = "job"
LINK = "link"


class AffinityLoopError(DLClusterError):
    """The Affinity graph has a loop, so Theorem 1 does not apply (Cassini drops the candidate)."""


# ----------------------------------------------------------------------------- validation


def _finite(
    name: str, value: object, *, kind: Literal["any", "nonneg", "positive"] = "nonneg"
) -> float:
    """``value`` as a float, or ConfigError naming ``name``, the value and what is allowed."""
    if isinstance(value, bool) or not isinstance(value, int | float | np.integer | np.floating):
        raise ConfigError(f"{name} must be a real number, got {value!r}")
    x = float(value)
    if not math.isfinite(x):
        raise ConfigError(f"{name} must be finite, got {value!r}")
    if kind == "positive" and x <= 0:
        raise ConfigError(f"{name} must be > 0, got {value!r}")
    if kind == "nonneg" and x < 0:
        raise ConfigError(f"{name} must be >= 0, got {value!r}")
    return x


def _capacity(capacity: object) -> float:
    return _finite("link capacity", capacity, kind="positive")


# ----------------------------------------------------------------------------- profiles


@dataclass(frozen=True)
class Phase:
    """One phase of an iteration: ``demand`` bandwidth during ``[start, start + duration)``.

    ``start`` and ``duration`` are seconds from the start of the iteration; a Down
    (compute) phase has demand 0, an Up (communication) phase a positive demand (4.1.1).
    """

    start: float
    duration: float
    demand: float

    def __post_init__(self) -> None:
        object.__setattr__(self, "start", _finite("phase start", self.start))
        object.__setattr__(self, "duration", _finite("phase duration", self.duration))
        object.__setattr__(self, "demand", _finite("phase demand", self.demand))

    @property
    def end(self) -> float:
        return self.start + self.duration


@dataclass(frozen=True)
class CommProfile:
    """Periodic network demand of a job measured in isolation (4.1.1 takeaways, 4.3).

    ``iteration_time`` (s) is the period; ``phases`` lie inside ``[0, iteration_time]``.
    Time not covered by a phase has zero demand; overlapping phases add up.
    """

    iteration_time: float
    phases: tuple[Phase, ...]
    name: str = ""

    def __post_init__(self) -> None:
        label = f"iteration time of job {self.name!r}" if self.name else "iteration time"
        t = _finite(label, self.iteration_time, kind="positive")
        object.__setattr__(self, "iteration_time", t)
        phases = tuple(p if isinstance(p, Phase) else Phase(*p) for p in self.phases)
        slack = _TIME_RTOL * t
        for i, p in enumerate(phases):
            if p.end > t + slack:
                raise ConfigError(
                    f"phase {i} of {self.name or 'profile'} ends at {p.end!r} s, after the "
                    f"iteration time {t!r} s; phases must lie inside [0, iteration_time]"
                )
        object.__setattr__(self, "phases", phases)

    @classmethod
    def data_parallel(
        cls, iteration_time: float, up_time: float, bandwidth: float, name: str = ""
    ) -> CommProfile:
        """Data-parallel job (4.2): a Down (compute) phase, then one Up phase of ``up_time``."""
        t = _finite("iteration time", iteration_time, kind="positive")
        up = _finite("up_time", up_time)
        if up > t * (1 + _TIME_RTOL):
            raise ConfigError(f"up_time {up_time!r} s must be <= iteration time {t!r} s")
        up = min(up, t)
        return cls(t, (Phase(0.0, t - up, 0.0), Phase(t - up, up, bandwidth)), name)

    @classmethod
    def from_segments(cls, segments: Iterable[tuple[float, float]], name: str = "") -> CommProfile:
        """Multi-phase (model/hybrid-parallel, 4.3.3) job from back-to-back segments.

        ``segments`` is ``(duration, demand)`` pairs in order; the iteration time is their
        total duration (e.g. the six Up-Down phases of Fig. 4.1(d)).
        """
        phases, t = [], 0.0
        for duration, demand in segments:
            d = _finite("segment duration", duration)
            phases.append(Phase(t, d, demand))
            t += d
        return cls(t, tuple(phases), name)

    @classmethod
    def multi_phase(
        cls,
        iteration_time: float,
        phases: Iterable[tuple[float, float, float]],
        name: str = "",
    ) -> CommProfile:
        """Job with arbitrary ``(start, duration, demand)`` phases inside one iteration."""
        return cls(iteration_time, tuple(Phase(*p) for p in phases), name)

    @property
    def peak_demand(self) -> float:
        """Largest instantaneous demand (sum of the phases active at the same time)."""
        events = sorted(
            [(p.start, 1, p.demand) for p in self.phases if p.duration > 0]
            + [(p.end, 0, -p.demand) for p in self.phases if p.duration > 0]
        )
        level = peak = 0.0
        for _, _, delta in events:  # ends (0) sort before starts (1) at the same instant
            level += delta
            peak = max(peak, level)
        return peak

    @property
    def mean_demand(self) -> float:
        """Average demand over one iteration (bytes per iteration / iteration time)."""
        return sum(p.duration * p.demand for p in self.phases) / self.iteration_time

    def sectors(self, n: int) -> np.ndarray:
        """Average demand over each of ``n`` equal slices of one iteration."""
        if n < 1:
            raise ConfigError(f"number of sectors must be >= 1, got {n!r}")
        out = np.zeros(n)
        if not self.phases:
            return out
        edges = np.linspace(0.0, self.iteration_time, n + 1)
        starts = np.array([p.start for p in self.phases])
        ends = np.array([p.end for p in self.phases])
        demand = np.array([p.demand for p in self.phases])
        overlap = np.minimum(edges[1:, None], ends) - np.maximum(edges[:-1, None], starts)
        np.clip(overlap, 0.0, None, out=overlap)
        return (overlap @ demand) * (n / self.iteration_time)


# ----------------------------------------------------------------------------- unified circle


@dataclass(frozen=True, eq=False)
class UnifiedCircle:
    """Unified circle of the jobs on one link (4.3.2) discretised into ``perimeter_sectors``.

    Angle index ``k`` covers ``[k, k + 1) * sector_s`` seconds of the perimeter and the
    angle ``2 pi k / perimeter_sectors`` radians (Table 4.1 set ``A``). Job ``j`` spans
    ``iteration_sectors[j]`` sectors per iteration and repeats
    ``perimeter_sectors / iteration_sectors[j]`` times (Table 4.1 ``r_j``).
    """

    profiles: tuple[CommProfile, ...]
    sector_s: float
    iteration_sectors: tuple[int, ...]
    perimeter_sectors: int
    exact: bool
    max_rel_error: float
    bases: tuple[np.ndarray, ...] = field(repr=False)

    @property
    def n_jobs(self) -> int:
        return len(self.profiles)

    @property
    def perimeter_s(self) -> float:
        """Perimeter ``p`` in seconds (Eq. 4.5)."""
        return self.perimeter_sectors * self.sector_s

    @property
    def n_angles(self) -> int:
        """``|A|``, the number of discrete angles."""
        return self.perimeter_sectors

    @property
    def iterations(self) -> tuple[int, ...]:
        """``r_j``: iterations of each job on the circle."""
        return tuple(self.perimeter_sectors // n for n in self.iteration_sectors)

    @property
    def quantized_iteration_times(self) -> tuple[float, ...]:
        """Iteration times as represented on the circle (s)."""
        return tuple(n * self.sector_s for n in self.iteration_sectors)

    def angle(self, sectors: int) -> float:
        """Angle in radians of a rotation by ``sectors`` discrete angles."""
        return 2.0 * math.pi * sectors / self.perimeter_sectors


def _lcm(values: Iterable[int]) -> int:
    return math.lcm(*values) if values else 1


_FITS: dict[tuple[tuple[int, ...], int], tuple[int, dict[int, int], float]] = {}


@lru_cache(maxsize=1024)  # rows of max_sectors + 1 floats: 16 MB at the default cap
def _fit_errors(n: int, cap: int) -> np.ndarray:
    """Per perimeter ``P <= cap``: smallest ``|m - n| / n`` over divisors ``m`` of ``P`` within
    ``[n/2, 2n]`` (inf where none)."""
    ms = np.arange(max(1, -(-n // 2)), min(cap, 2 * n) + 1)
    counts = cap // ms
    offsets = np.cumsum(counts) - counts
    mult = np.arange(int(counts.sum())) - np.repeat(offsets, counts) + 1
    row = np.full(cap + 1, np.inf)
    np.minimum.at(row, np.repeat(ms, counts) * mult, np.repeat(np.abs(ms - n) / n, counts))
    row.setflags(write=False)
    return row


@lru_cache(maxsize=4096)
def _divisors(p: int) -> list[int]:
    """The divisors of ``p``, ascending (shared: do not mutate)."""
    d = np.arange(1, p + 1)
    return d[p % d == 0].tolist()


def fit_perimeter(ns: Sequence[int], cap: int) -> tuple[int, dict[int, int], float]:
    """Best perimeter ``P <= cap`` whose divisors approximate every ``n_j`` (module docstring),
    vectorised over divisors and cached.

    Returns the perimeter, per distinct ``n`` the iteration length ``m`` dividing it (nearest,
    then smaller), and the worst relative change ``max_j |m_j - n_j| / n_j``.
    """
    key = (tuple(sorted(set(ns))), cap)
    hit = _FITS.get(key)
    if hit is not None:
        return hit
    worst = _worst_errors(key[0], cap).copy()
    worst[0] = np.inf
    p = int(np.argmin(worst))
    divisors = _divisors(p)  # ascending
    chosen = {}
    for n in key[0]:  # the divisor in [n/2, 2n] nearest n, then the smaller
        lo, hi = max(1, -(-n // 2)), min(p, 2 * n)
        i = bisect.bisect_right(divisors, n)
        below = divisors[i - 1] if i > 0 and divisors[i - 1] >= lo else -1
        above = divisors[i] if i < len(divisors) and divisors[i] <= hi else -1
        if below < 0 or (above >= 0 and above - n < n - below):
            chosen[n] = above
        else:
            chosen[n] = below
    if len(_FITS) >= 4096:
        _FITS.clear()
    _FITS[key] = (p, chosen, float(worst[p]))
    return _FITS[key]


_WORST: dict[tuple[tuple[int, ...], int], np.ndarray] = {}


def _worst_errors(ns: tuple[int, ...], cap: int) -> np.ndarray:
    """Elementwise max of the :func:`_fit_errors` rows of the sorted distinct ``ns`` (shared:
    do not mutate). Remembered per set (bounded): a set that gained one value since (a job
    joined a link) takes its predecessor's max and one more row; the max is exact, so the
    order does not matter."""
    worst = None
    if len(ns) > 2:
        for i in range(len(ns)):
            sub = _WORST.get((ns[:i] + ns[i + 1 :], cap))
            if sub is not None:
                worst = np.maximum(sub, _fit_errors(ns[i], cap))
                break
    if worst is None:
        rows = [_fit_errors(n, cap) for n in ns]
        worst = rows[0].copy()
        for row in rows[1:]:
            np.maximum(worst, row, out=worst)
    if len(_WORST) >= 512:  # rows of cap + 1 floats: 8 MB at the default cap
        _WORST.clear()
    _WORST[(ns, cap)] = worst
    return worst


def unified_circle(
    profiles: Sequence[CommProfile],
    *,
    precision_s: float = DEFAULT_PRECISION_S,
    max_sectors: int = DEFAULT_MAX_SECTORS,
) -> UnifiedCircle:
    """Place ``profiles`` on their unified circle: perimeter = LCM of iteration times (4.3.2).

    See the module docstring for the quantum (``precision_s``) and the ``max_sectors`` cap.
    """
    q = _finite("precision_s", precision_s, kind="positive")
    if isinstance(max_sectors, bool) or not isinstance(max_sectors, int | np.integer):
        raise ConfigError(f"max_sectors must be an integer >= 1, got {max_sectors!r}")
    if max_sectors < 1:
        raise ConfigError(f"max_sectors must be an integer >= 1, got {max_sectors!r}")
    cap = int(max_sectors)
    profiles = tuple(profiles)
    for i, p in enumerate(profiles):
        if not isinstance(p, CommProfile):
            raise ConfigError(f"job {i}: expected a CommProfile, got {type(p).__name__}")
    times = [p.iteration_time for p in profiles]
    ns = [max(1, math.floor(t / q + 0.5)) for t in times]
    if ns and max(ns) > cap:  # one iteration alone is longer than the cap: coarser angles
        q *= math.ceil(max(ns) / cap)
        ns = [max(1, math.floor(t / q + 0.5)) for t in times]
    perimeter = _lcm(ns)
    exact, rel = True, 0.0
    if perimeter > cap:
        perimeter, fitted, rel = fit_perimeter(ns, cap)
        ns, exact = [fitted[n] for n in ns], False
    bases = []
    for p, n in zip(profiles, ns, strict=True):
        base = p.sectors(n)
        base.setflags(write=False)
        bases.append(base)
    return UnifiedCircle(profiles, q, tuple(ns), perimeter, exact, rel, tuple(bases))


def _check_job(circle: UnifiedCircle, job: int) -> None:
    if (
        isinstance(job, bool)
        or not isinstance(job, int | np.integer)
        or not (0 <= job < circle.n_jobs)
    ):
        raise ConfigError(f"job index must be an integer in [0, {circle.n_jobs}), got {job!r}")


def job_demand(circle: UnifiedCircle, job: int, rotation: int = 0) -> np.ndarray:
    """Demand of ``job`` at every discrete angle, delayed by ``rotation`` angles.

    ``bw_circle_j(theta - theta_j)`` of Table 4.1: the job's per-iteration sectors repeated
    ``r_j`` times around the circle and rotated by ``rotation`` sectors (a positive rotation
    moves the pattern later in time).
    """
    _check_job(circle, job)
    n = circle.iteration_sectors[job]
    tile = np.tile(circle.bases[job], circle.perimeter_sectors // n)
    return np.roll(tile, int(rotation))


def total_demand(circle: UnifiedCircle, rotations: Sequence[int]) -> np.ndarray:
    """``demand_theta`` of Table 4.1: summed rotated demands of all jobs at every angle."""
    if len(rotations) != circle.n_jobs:
        raise ConfigError(f"expected {circle.n_jobs} rotations (one per job), got {len(rotations)}")
    total = np.zeros(circle.perimeter_sectors)
    for j, r in enumerate(rotations):
        total += job_demand(circle, j, r)
    return total


def _excess_sum(total: np.ndarray, capacity: float, axis: int | None = None) -> np.ndarray:
    """Sum of ``Excess`` (Table 4.1) along ``axis``; sums within tolerance of 0 become 0."""
    over = total - capacity
    np.maximum(over, 0.0, out=over)
    ex = over.sum(axis=axis)
    limit = _EXCESS_RTOL * capacity * total.shape[-1]
    if np.ndim(ex) == 0:
        return ex if ex > limit else np.float64(0.0)
    ex[ex <= limit] = 0.0
    return ex


def _check_peaks(profiles: Sequence[CommProfile], capacity: float) -> None:
    for i, p in enumerate(profiles):
        peak = p.peak_demand
        if peak > capacity * (1 + _EXCESS_RTOL):
            who = f"job {i} ({p.name})" if p.name else f"job {i}"
            raise ConfigError(
                f"{who} alone demands {peak!r} > link capacity {capacity!r}; a profile "
                "measured in isolation must not exceed the capacity of a link it crosses"
            )


def compatibility_score(
    circle: UnifiedCircle, rotations: Sequence[int], capacity: float = 1.0
) -> float:
    """Table 4.1 score ``1 - sum_theta Excess(demand_theta) / (|A| C)`` for given rotations.

    ``rotations`` are in discrete angles (sectors), one per job. Raises ``ConfigError`` when
    a job's peak demand alone exceeds ``capacity`` (module docstring).
    """
    c = _capacity(capacity)
    _check_peaks(circle.profiles, c)
    total = total_demand(circle, rotations)
    return 1.0 - float(_excess_sum(total, c)) / (circle.perimeter_sectors * c)


# ----------------------------------------------------------------------------- search


@dataclass(frozen=True, eq=False)
class LinkCompatibility:
    """Result of Cassini's optimisation (Table 4.1) for the jobs on one link.

    ``rotations`` in discrete angles, ``angles`` in radians (``theta_j``), ``time_shifts`` in
    seconds (Eq. 4.5), one per job in input order; the first job is the reference (0).
    ``exact`` is True when the search was exhaustive (proved optimal on the circle).
    """

    score: float
    rotations: tuple[int, ...]
    angles: tuple[float, ...]
    time_shifts: tuple[float, ...]
    circle: UnifiedCircle
    exact: bool
    method: str


class _Rotations:
    """All ``n`` rotations of one job on a circle of ``P`` angles, for the search.

    ``excess(rest, C)`` returns, for every rotation ``r``, the summed Excess of
    ``rest + job delayed by r``. Two equivalent evaluations, the cheaper one is used:

    - dense: an ``(n, P)`` bank of the rotated demand vectors (``n * P`` work);
    - by level: the job's tile is ``n``-periodic, so angle ``theta = m n + a`` always sees
      the job's sector ``(a - r) mod n``. With ``k`` distinct sector levels ``v`` (2-4 for a
      data-parallel job), ``F[v, a] = sum_m Excess(rest[m n + a] + v)`` costs ``k * P`` and
      ``excess(r) = sum_a F[level((a - r) mod n), a]`` costs ``n * n``.
    """

    def __init__(self, base: np.ndarray, size: int) -> None:
        n = base.size
        self.n, self.size = n, size
        tile = np.tile(base, size // n)
        ext = np.concatenate((tile[size - n + 1 :], tile))
        self.bank = sliding_window_view(ext, size)[::-1]  # row r: tile delayed by r
        self.levels, inverse = np.unique(base, return_inverse=True)
        self.by_level = self.levels.size * size + n * n < n * size
        if self.by_level:
            a = np.arange(n)
            self.gather = inverse.reshape(-1)[(a[None, :] - a[:, None]) % n]  # [r, a]
            self.cols = np.broadcast_to(a, (n, n))

    def row(self, r: int) -> np.ndarray:
        return self.bank[r]

    def excess(self, rest: np.ndarray, capacity: float) -> np.ndarray:
        if not self.by_level:
            return _excess_sum(self.bank + rest, capacity, axis=1)
        grid = rest.reshape(-1, self.n) - capacity  # [m, a]
        over = grid[None, :, :] + self.levels[:, None, None]
        np.maximum(over, 0.0, out=over)
        table = over.sum(axis=1)  # F[v, a]
        ex = table[self.gather, self.cols].sum(axis=1)
        ex[ex <= _EXCESS_RTOL * capacity * self.size] = 0.0
        return ex


def _exhaustive(jobs: list[_Rotations], capacity: float) -> tuple[float, list[int]]:
    best_ex, best = math.inf, [0] * len(jobs)
    middle = [range(job.n) for job in jobs[1:-1]]
    for combo in itertools.product(*middle):
        s = jobs[0].row(0).copy()
        for job, r in zip(jobs[1:-1], combo, strict=True):
            s += job.row(r)
        ex = jobs[-1].excess(s, capacity)
        r_last = int(np.argmin(ex))
        if ex[r_last] < best_ex:
            best_ex, best = float(ex[r_last]), [0, *combo, r_last]
            if best_ex == 0.0:
                break
    return best_ex, best


def _total(jobs: list[_Rotations], rot: list[int]) -> np.ndarray:
    s = jobs[0].row(rot[0]).copy()
    for job, r in zip(jobs[1:], rot[1:], strict=True):
        s += job.row(r)
    return s


def _descent(
    jobs: list[_Rotations], rot: list[int], capacity: float, tol: float
) -> tuple[float, list[int]]:
    s = _total(jobs, rot)
    cur = float(_excess_sum(s, capacity))
    for _ in range(64):  # sweeps; each strictly lowers the excess, so this always ends
        improved = False
        for j in range(1, len(jobs)):
            rest = s - jobs[j].row(rot[j])
            ex = jobs[j].excess(rest, capacity)
            r = int(np.argmin(ex))
            if ex[r] < cur - tol:
                rot[j], cur, improved = r, float(ex[r]), True
                s = rest + jobs[j].row(r)
        if not improved or cur <= 0.0:
            break
    return float(_excess_sum(_total(jobs, rot), capacity)), rot


def _greedy(jobs: list[_Rotations], capacity: float) -> list[int]:
    rot = [0] * len(jobs)
    s = jobs[0].row(0).copy()
    order = sorted(range(1, len(jobs)), key=lambda j: (-float(jobs[j].row(0).sum()), j))
    for j in order:
        rot[j] = int(np.argmin(jobs[j].excess(s, capacity)))
        s += jobs[j].row(rot[j])
    return rot


def link_compatibility(
    profiles: Sequence[CommProfile],
    capacity: float = 1.0,
    *,
    precision_s: float = DEFAULT_PRECISION_S,
    max_sectors: int = DEFAULT_MAX_SECTORS,
    method: Literal["auto", "exhaustive", "descent"] = "auto",
    restarts: int = DEFAULT_RESTARTS,
    seed: int = 0,
    exhaustive_budget: int = DEFAULT_EXHAUSTIVE_BUDGET,
) -> LinkCompatibility:
    """Best rotations and compatibility score of the jobs sharing one link (4.3.4-4.3.7).

    Builds the unified circle, maximises the Table 4.1 score over rotations (search method
    in the module docstring) and converts the rotations into time shifts with Eq. 4.5.
    """
    c = _capacity(capacity)
    if method not in ("auto", "exhaustive", "descent"):
        raise ConfigError(f"method must be 'auto', 'exhaustive' or 'descent', got {method!r}")
    if isinstance(restarts, bool) or not isinstance(restarts, int) or restarts < 0:
        raise ConfigError(f"restarts must be an integer >= 0, got {restarts!r}")
    circle = unified_circle(profiles, precision_s=precision_s, max_sectors=max_sectors)
    _check_peaks(circle.profiles, c)
    j_count, size = circle.n_jobs, circle.perimeter_sectors
    if j_count == 0:
        return LinkCompatibility(1.0, (), (), (), circle, True, "empty")
    jobs = [_Rotations(b, size) for b in circle.bases]
    if j_count == 1:
        rot, used, exact = [0], "single", True
    else:
        combos = math.prod(circle.iteration_sectors[1:])
        if method == "exhaustive" or (method == "auto" and combos * size <= exhaustive_budget):
            _, rot = _exhaustive(jobs, c)
            used, exact = "exhaustive", True
        else:
            tol = 1e-12 * c * size
            best_ex, rot = _descent(jobs, _greedy(jobs, c), c, tol)
            rng = np.random.default_rng(seed)
            for _ in range(restarts):
                if best_ex <= 0.0:
                    break
                start = [0] + [int(rng.integers(n)) for n in circle.iteration_sectors[1:]]
                ex, cand = _descent(jobs, start, c, tol)
                if ex < best_ex - tol or (abs(ex - best_ex) <= tol and cand < rot):
                    best_ex, rot = ex, cand
            used, exact = "descent", False
    score = compatibility_score(circle, rot, c)
    angles = tuple(circle.angle(r) for r in rot)
    # Eq. 4.5 with theta_j / (2 pi) * p == r_j * sector_s written exactly (no pi round trip)
    shifts = tuple(
        (r * circle.sector_s) % p.iteration_time for r, p in zip(rot, circle.profiles, strict=True)
    )
    return LinkCompatibility(score, tuple(rot), angles, shifts, circle, exact, used)


def rotation_to_time_shift(angle: float, perimeter_s: float, iteration_time_s: float) -> float:
    """Eq. 4.5: ``t_j = (theta_j / (2 pi) * p) mod iter_time_j`` in seconds.

    ``p`` is the unified circle's perimeter; the job's own (measured) iteration time is the
    modulus, since shifting a periodic job by whole iterations changes nothing.
    """
    a = _finite("rotation angle", angle, kind="any")
    p = _finite("perimeter", perimeter_s, kind="positive")
    t = _finite("iteration time", iteration_time_s, kind="positive")
    shift = (a / (2.0 * math.pi) * p) % t
    return 0.0 if shift >= t else shift


# ----------------------------------------------------------------------------- affinity graph


def affinity_graph(job_links: Mapping[Hashable, Iterable[Hashable]]) -> nx.Graph:
    """Cassini's bipartite Affinity graph (4.4.1, Algorithm 2 lines 3-12).

    ``job_links`` maps each job id to the links its traffic crosses. Links that carry more
    than one job become ``("link", id)`` nodes (``bipartite=1``), the jobs on them
    ``("job", id)`` nodes (``bipartite=0``); an edge joins a job and a link it crosses.
    """
    link_jobs: dict[Hashable, list[Hashable]] = {}
    for job, links in job_links.items():
        for link in dict.fromkeys(links):
            link_jobs.setdefault(link, []).append(job)
    shared = {link: jobs for link, jobs in link_jobs.items() if len(jobs) > 1}
    graph = nx.Graph()
    for job, links in job_links.items():
        if any(link in shared for link in links):
            graph.add_node((JOB, job), bipartite=0)
    for link in shared:
        graph.add_node((LINK, link), bipartite=1)
    for job, links in job_links.items():
        for link in dict.fromkeys(links):
            if link in shared:
                graph.add_edge((JOB, job), (LINK, link))
    return graph


def find_loop(graph: nx.Graph) -> list[tuple[Hashable, Hashable]] | None:
    """One cycle of ``graph`` as a list of edges, or None when it is a forest."""
    for component in nx.connected_components(graph):
        sub = graph.subgraph(component)
        if sub.number_of_edges() >= sub.number_of_nodes():
            return list(nx.find_cycle(sub))
    return None


def has_loop(graph: nx.Graph) -> bool:
    """True when the Affinity graph has a loop (a cycle), which Theorem 1 excludes."""
    return any(
        graph.subgraph(c).number_of_edges() >= len(c) for c in nx.connected_components(graph)
    )


def assign_time_shifts(
    graph: nx.Graph,
    link_shifts: Mapping[Hashable, Mapping[Hashable, float]],
    iteration_times: Mapping[Hashable, float] | None = None,
) -> dict[Hashable, float]:
    """Algorithm 1: one time shift (s) per job of a loop-free Affinity graph.

    ``link_shifts[link][job]`` is the edge weight ``w_(j,l) = t_j^l``, the job's time shift
    from that link's optimisation (Eq. 4.5). Per connected subgraph the first job (insertion
    order) gets 0; BFS over jobs sets ``t_k = t_j - w_(j,l) + w_(l,k)`` (line 17). With
    ``iteration_times`` each ``t_k`` is taken modulo job ``k``'s iteration time as in line 17;
    without, shifts are left unreduced and Theorem 1's Eq. 4.6 holds exactly:
    ``t_a - t_b == t_a^l - t_b^l`` for all jobs ``a, b`` on link ``l``. Raises
    :class:`AffinityLoopError` on a graph with a loop.
    """
    loop = find_loop(graph)
    if loop is not None:
        path = " - ".join(f"{u[0]} {u[1]!r}" for u, _ in loop)
        raise AffinityLoopError(
            f"the Affinity graph has a loop ({path}); Algorithm 1 needs a loop-free graph "
            "(Theorem 1), Cassini discards such placement candidates"
        )

    def weight(link: Hashable, job: Hashable) -> float:
        try:
            w = link_shifts[link][job]
        except KeyError:
            raise ConfigError(
                f"no time shift for job {job!r} on link {link!r} in link_shifts"
            ) from None
        return _finite(f"time shift of job {job!r} on link {link!r}", w, kind="any")

    def reduce(job: Hashable, t: float) -> float:
        if iteration_times is None:
            return t
        if job not in iteration_times:
            raise ConfigError(f"no iteration time for job {job!r} in iteration_times")
        period = _finite(f"iteration time of job {job!r}", iteration_times[job], kind="positive")
        r = t % period
        return 0.0 if r >= period else r

    shifts: dict[Hashable, float] = {}
    for node in graph.nodes:
        if node[0] != JOB or node[1] in shifts:
            continue
        shifts[node[1]] = reduce(node[1], 0.0)
        queue = deque([node])
        while queue:
            j = queue.popleft()
            for link in graph[j]:
                for k in graph[link]:
                    if k[1] in shifts:
                        continue
                    t = shifts[j[1]] - weight(link[1], j[1]) + weight(link[1], k[1])
                    shifts[k[1]] = reduce(k[1], t)
                    queue.append(k)
    return shifts


@dataclass(frozen=True, eq=False)
class PlacementCompatibility:
    """One placement candidate scored as in Algorithm 2.

    ``score`` is the mean of the per-link scores (lines 17-25; 1.0 when no link is shared),
    ``time_shifts`` the unique per-job shifts of Algorithm 1 (jobs sharing no link omitted).
    """

    score: float
    link_scores: dict[Hashable, float]
    time_shifts: dict[Hashable, float]
    links: dict[Hashable, LinkCompatibility]
    graph: nx.Graph


def placement_compatibility(
    job_links: Mapping[Hashable, Iterable[Hashable]],
    profiles: Mapping[Hashable, CommProfile],
    capacity: float | Mapping[Hashable, float] = 1.0,
    **search: Any,
) -> PlacementCompatibility:
    """Affinity graph, per-link optimisation and Algorithm 1 for one placement candidate.

    ``capacity`` is one value for every link or a mapping link -> capacity; ``search`` is
    passed to :func:`link_compatibility`. Raises :class:`AffinityLoopError` when the graph has
    a loop (the candidate should be discarded, Algorithm 2 lines 13-15).
    """
    job_links = {j: list(links) for j, links in job_links.items()}
    graph = affinity_graph(job_links)
    if has_loop(graph):
        assign_time_shifts(graph, {})  # raises with the loop in the message
    results: dict[Hashable, LinkCompatibility] = {}
    link_shifts: dict[Hashable, dict[Hashable, float]] = {}
    for node in graph.nodes:
        if node[0] != LINK:
            continue
        link = node[1]
        jobs = [k[1] for k in graph[node]]
        missing = [j for j in jobs if j not in profiles]
        if missing:
            raise ConfigError(f"no CommProfile for job(s) {missing!r} on link {link!r}")
        if isinstance(capacity, Mapping):
            if link not in capacity:
                raise ConfigError(f"no capacity for link {link!r}")
            cap = capacity[link]
        else:
            cap = capacity
        res = link_compatibility([profiles[j] for j in jobs], cap, **search)
        results[link] = res
        link_shifts[link] = dict(zip(jobs, res.time_shifts, strict=True))
    periods = {j[1]: profiles[j[1]].iteration_time for j in graph.nodes if j[0] == JOB}
    shifts = assign_time_shifts(graph, link_shifts, periods)
    scores = {link: r.score for link, r in results.items()}
    mean = float(np.mean(list(scores.values()))) if scores else 1.0
    return PlacementCompatibility(mean, scores, shifts, results, graph)

"""Virtual clusters and recurring job groups for the synthetic generators (``groups:``).

Real clusters carry duration signal in what a job is submitted with: in Philly the virtual
cluster (VC, the team queue) alone explains about a sixth to a quarter of the variance of the
normal scores of the durations. With a ``groups`` option, a generator submits each job to a VC
and to a recurring job group (a user and a job name) and makes its duration depend on them,
while every job's duration keeps the generator's own marginal distribution (so offered load,
and the meaning of a preset, do not change).

Mechanism (a Gaussian copula):

- VC ``v`` receives a share ``w_v`` of the jobs and has a latent effect ``a_v``: draws from
  N(0, 1), then centred and scaled so that their job-weighted (by ``w``) mean is 0 and variance
  1. The scaling makes the share of variance the VC explains ``r_vc`` in every workload, not
  only on average over seeds (with a few large VCs the raw draws' spread varies a lot).
- Recurring groups: a job starts a new group of its VC with probability ``p_new_group`` (the
  VC's first job always does); otherwise it joins the group of an earlier job of its VC drawn
  uniformly, i.e. a group with probability proportional to its size (a Yule-Simon process:
  heavy-tailed group sizes, as recurring jobs are). A group has a latent effect
  ``b_g ~ N(0, 1)`` and belongs to one of its VC's ``users_per_vc`` users (uniform).
- A job's latent score is
  ``z = sqrt(r_vc) a_v + sqrt(r_group) b_g + sqrt(1 - r_vc - r_group) e``, where ``e`` is the
  normal score of the uniform the generator drew for the job without groups. Its duration is
  the generator's own quantile function at ``F(z)``, where
  ``F(z) = sum_v w_v Phi((z - sqrt(r_vc) a_v) / sqrt(1 - r_vc))`` is the distribution of ``z``
  given the drawn VC effects (Phi when ``r_vc`` = 0). ``F(z)`` is exactly uniform for every
  job, so the marginal duration distribution is the generator's, whatever the VC effects
  drawn; ``r_vc`` and ``r_group`` are the shares of the latent variance that the VC and the
  group explain.
- Habits: with probability ``habit`` a job reuses its group's model and GPU demand (drawn once
  per group from the generator's own model and demand distributions), else it keeps its own
  draws. Marginal model and demand distributions are unchanged, and they stay independent of
  the duration (the habits are drawn independently of ``b_g``), so the offered load formula
  still holds. The GPU demand does not depend on the VC.

The effects are constant in time: a VC's or a group's jobs are alike whenever they come (in
Philly the VCs drift and recurring jobs come in bursts, which a predictor from the latest
finished jobs exploits).

With ``r_vc = r_group = 0`` and ``habit = 0`` the jobs are the groups-off jobs of the same seed
(up to rounding in Phi(Phi^-1(u))), labelled with VCs, users and job names.

The VC shares and ``r_vc`` are fitted to Philly (constants below); Philly has no users or job
names, so ``r_group``, ``p_new_group``, ``users_per_vc`` and ``habit`` are modelling choices,
not fits.
"""

from __future__ import annotations

import math
import statistics
from collections import deque
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Literal, Protocol

import numpy as np
from scipy import special

# --------------------------------------------------------------------------- fitted constants
#
# Fitted to Pollux's Philly trace (pollux_adaptdl/traces/philly.csv, its `cluster` column is
# the VC) by experiments/workloads/fit_philly_groups.py (re-run: ``python
# experiments/workloads/fit_philly_groups.py``; it writes
# experiments/results/workload/philly_groups.md).
#   Population: the Dally fit's filter (num_gpus >= 2, duration >= 600 s, demands rounded up
#           to a power of two, at most 64 GPUs), the jobs whose marginal the Dally generator
#           reproduces; VCs with fewer than PHILLY_MIN_VC_JOBS such jobs are dropped.
#   Shares: each kept VC's fraction of the kept jobs, largest first.
#   r_vc: the job-weighted share of the variance of the normal scores of log(duration) that
#           the VC explains, bias-corrected: (SS_between - (k - 1) MS_within) / SS_total.
#   Over every Philly job the VC explains more (0.257; VC x GPUs 0.332) and the VC shares are
#           more skewed (one VC holds half the jobs); the page reports both populations.
PHILLY_MIN_VC_JOBS = 50
PHILLY_GROUPS_FIT_NUM_JOBS = 3332  # 6 jobs of one smaller VC dropped
PHILLY_VC_SHARES: tuple[float, ...] = (
    0.2512, 0.1285, 0.1245, 0.1089, 0.1035, 0.0978, 0.078, 0.0483, 0.0381, 0.021,
)  # fmt: skip
PHILLY_R_VC = 0.16  # VC x GPUs: 0.250 (not used: the demand does not depend on the VC)

# Modelling choices (Philly has no user or job-name column): see the module docstring.
DEFAULT_R_GROUP = 0.3
DEFAULT_P_NEW_GROUP = 0.25
DEFAULT_USERS_PER_VC = 8
DEFAULT_HABIT = 0.8


class GroupSpec(Protocol):
    """What the generators read from a ``groups`` config (``config.WorkloadGroups``)."""

    @property
    def weights(self) -> tuple[float, ...]:
        """Job share of each VC (need not sum to 1)."""
        ...

    @property
    def r_vc(self) -> float: ...

    @property
    def r_group(self) -> float: ...

    @property
    def p_new_group(self) -> float: ...

    @property
    def users_per_vc(self) -> int: ...

    @property
    def habit(self) -> float: ...


@dataclass(frozen=True)
class GroupAssignment:
    """Per job: its VC, recurring group, user, whether it follows its group's habit, and the
    quantile level ``u`` of its duration; ``num_groups`` groups in order of creation."""

    vc: np.ndarray
    group: np.ndarray
    user: np.ndarray
    habit: np.ndarray
    u: np.ndarray
    num_vcs: int
    num_users: int
    num_groups: int

    def labels(self) -> tuple[list[str], list[str], list[str]]:
        """The ``vc``, ``user`` and ``job_name`` strings of every job (``vc03``, ``u017``,
        ``g0042``)."""

        def names(prefix: str, ids: np.ndarray, count: int, width: int) -> list[str]:
            w = max(width, len(str(max(count - 1, 0))))
            table = [f"{prefix}{k:0{w}d}" for k in range(count)]
            return [table[k] for k in ids.tolist()]

        return (
            names("vc", self.vc, self.num_vcs, 2),
            names("u", self.user, self.num_users, 3),
            names("g", self.group, self.num_groups, 4),
        )


def standardized_effects(weights: np.ndarray, rng: np.random.Generator) -> np.ndarray:
    """One N(0, 1) effect per VC, centred and scaled to job-weighted mean 0 and variance 1
    (zeros for a single VC)."""
    a = rng.standard_normal(weights.size)
    a = a - float(weights @ a)
    var = float(weights @ (a * a))
    return a / math.sqrt(var) if var > 0 else np.zeros_like(a)


def assign_groups(spec: GroupSpec, u0: np.ndarray, rng: np.random.Generator) -> GroupAssignment:
    """VCs, groups, users and duration levels for jobs whose groups-off duration levels are
    ``u0`` (uniforms in [0, 1), in arrival order). Draws, in this order: the VC effects, each
    job's VC, new-group flag, earlier-job pick and habit flag, then each group's effect and
    user."""
    n = int(u0.size)
    w = np.asarray(spec.weights, dtype=np.float64)
    w = w / w.sum()
    a = standardized_effects(w, rng)
    vc = rng.choice(w.size, size=n, p=w)
    new = rng.random(n) < spec.p_new_group
    pick = rng.random(n)
    habit = rng.random(n) < spec.habit
    group = np.empty(n, dtype=np.int64)
    members: list[list[int]] = [[] for _ in range(w.size)]  # group of each earlier job, per VC
    num_groups = 0
    for i, v in enumerate(vc.tolist()):
        seen = members[v]
        if not seen or new[i]:
            g = num_groups
            num_groups += 1
        else:
            g = seen[int(pick[i] * len(seen))]
        seen.append(g)
        group[i] = g
    group_vc = np.empty(num_groups, dtype=np.int64)
    group_vc[group] = vc
    b = rng.standard_normal(num_groups)
    users = int(spec.users_per_vc)
    group_user = group_vc * users + rng.integers(users, size=num_groups)
    e = special.ndtri(np.clip(np.asarray(u0, dtype=np.float64), 2.0**-60, None))
    r_vc, r_group = float(spec.r_vc), float(spec.r_group)
    shift = math.sqrt(r_vc) * a
    z = shift[vc] + math.sqrt(r_group) * b[group] + math.sqrt(1.0 - r_vc - r_group) * e
    return GroupAssignment(
        vc=vc.astype(np.int64),
        group=group,
        user=group_user[group],
        habit=habit,
        u=mixture_cdf(z, w, shift, math.sqrt(1.0 - r_vc)),
        num_vcs=int(w.size),
        num_users=int(w.size) * users,
        num_groups=num_groups,
    )


def mixture_cdf(z: np.ndarray, w: np.ndarray, shift: np.ndarray, scale: float) -> np.ndarray:
    """``sum_v w_v Phi((z - shift_v) / scale)`` (``w`` sums to 1), clipped into [0, 1)."""
    if not np.any(shift):
        return np.clip(special.ndtr(z / scale), 0.0, np.nextafter(1.0, 0.0))
    out = np.zeros_like(z)
    for wv, sv in zip(w.tolist(), shift.tolist(), strict=True):
        out += wv * special.ndtr((z - sv) / scale)
    return np.clip(out, 0.0, np.nextafter(1.0, 0.0))


# --------------------------------------------------------------------------- fitting


@dataclass(frozen=True)
class VarianceShare:
    """Share of the variance of ``y`` explained by a grouping of the jobs."""

    eta2: float  # SS_between / SS_total (job-weighted, in sample)
    corrected: float  # (SS_between - (k - 1) MS_within) / SS_total
    icc: float  # one-way random-effects ICC(1) (each group weighted equally)
    num_groups: int


def normal_scores(x: np.ndarray) -> np.ndarray:
    """Phi^-1 of the mid-ranks (ties averaged) of ``x``, scaled into (0, 1)."""
    from scipy import stats

    r = stats.rankdata(x)
    return special.ndtri((r - 0.5) / x.size)


def variance_share(y: np.ndarray, labels: Sequence[object]) -> VarianceShare:
    """Between-group share of the variance of ``y`` (see :class:`VarianceShare`)."""
    ids: dict[object, int] = {}
    inv = np.fromiter((ids.setdefault(x, len(ids)) for x in labels), np.int64, len(labels))
    k, n = len(ids), y.size
    counts = np.bincount(inv, minlength=k).astype(np.float64)
    means = np.bincount(inv, y, minlength=k) / counts
    ssb = float(counts @ (means - y.mean()) ** 2)
    ssw = float(((y - means[inv]) ** 2).sum())
    sst = ssb + ssw
    if k < 2 or n <= k or sst == 0:
        return VarianceShare(0.0, 0.0, 0.0, k)
    msb, msw = ssb / (k - 1), ssw / (n - k)
    n0 = (n - float(counts @ counts) / n) / (k - 1)
    sb = max((msb - msw) / n0, 0.0)
    return VarianceShare(
        eta2=ssb / sst,
        corrected=max((ssb - (k - 1) * msw) / sst, 0.0),
        icc=sb / (sb + msw) if sb + msw > 0 else 0.0,
        num_groups=k,
    )


HistoryAgg = Literal["mean", "median", "geomean"]


def history_predictor(
    arrival: np.ndarray,
    duration: np.ndarray,
    keys: Sequence[object],
    last: int = 20,
    agg: HistoryAgg = "mean",
) -> np.ndarray:
    """For each job, the mean (``agg``: or median, or geometric mean) duration of the ``last``
    jobs of its key that finished most recently before it arrived (arrival + duration < its
    arrival): what a scheduler could predict from its finished jobs. NaN where none had."""
    if agg not in ("mean", "median", "geomean"):
        raise ValueError(f"agg must be 'mean', 'median' or 'geomean', got {agg!r}")
    n = arrival.size
    finish = arrival + duration
    by_finish = np.argsort(finish, kind="stable")
    by_arrival = np.argsort(arrival, kind="stable")
    hist: dict[object, deque[float]] = {}
    out = np.full(n, np.nan)
    k = 0
    for i in by_arrival.tolist():
        while k < n and finish[by_finish[k]] < arrival[i]:
            j = int(by_finish[k])
            d = float(duration[j])
            hist.setdefault(keys[j], deque(maxlen=last)).append(
                math.log(d) if agg == "geomean" else d
            )
            k += 1
        h = hist.get(keys[i])
        if h:
            if agg == "median":
                out[i] = statistics.median(h)
            elif agg == "geomean":
                out[i] = math.exp(math.fsum(h) / len(h))
            else:
                out[i] = math.fsum(h) / len(h)
    return out

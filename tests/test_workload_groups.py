"""Virtual clusters and recurring job groups of the synthetic generators (``groups:``)."""

from __future__ import annotations

import math
import re
from collections import defaultdict

import numpy as np
import pytest
from pydantic import ValidationError
from scipy import stats

from dlcluster_gym.cluster.topology import Cluster
from dlcluster_gym.config import WorkloadGroups, load_scenario
from dlcluster_gym.errors import ConfigError
from dlcluster_gym.scenario.build import build_workload
from dlcluster_gym.scenario.sizing import iteration_times
from dlcluster_gym.workload import generators as gen
from dlcluster_gym.workload import groups as grp
from dlcluster_gym.workload.job import Job

N = 20_000  # jobs for the distribution checks
BANDS = ((1.5, 3.0, 0.8), (3.0, 4.0, 0.2))  # Gavel's generator
POINT_BANDS = ((1.0, 1.0, 0.3), (0.5, 2.0, 0.7))  # a point mass inside a band
SYNTH = dict(models=("resnet50", "vgg11"), gpu_demands=(1, 2, 8), iterations=(100, 999))


@pytest.fixture(scope="module")
def cluster() -> Cluster:
    return Cluster("dally-2rack")


def rng(seed: int = 0) -> np.random.Generator:
    return np.random.default_rng(seed)


def durations(jobs: list[Job]) -> np.ndarray:
    """Run time at packed consolidation, as the generators draw it."""
    return np.array([j.duration_s for j in jobs])


def synthetic(n: int, cluster: Cluster, seed: int, **kw) -> list[Job]:
    """``synthetic_jobs`` of the ``SYNTH`` mix on ``cluster`` (Poisson at load 0.9)."""
    its = iteration_times(SYNTH["models"], SYNTH["gpu_demands"], cluster)
    return gen.synthetic_jobs(n, cluster.num_gpus, rng(seed), iteration_times=its, **SYNTH, **kw)


def share(jobs: list[Job], attr: str) -> float:
    """Bias-corrected share of the normal scores of log(duration) explained by ``attr``."""
    z = grp.normal_scores(np.log(durations(jobs)))
    return grp.variance_share(z, [getattr(j, attr) for j in jobs]).corrected


@pytest.fixture(scope="module")
def dally_default(cluster) -> list[Job]:
    return gen.dally_jobs(N, cluster.num_gpus, rng(3), arrival="poisson", groups=WorkloadGroups())


# --------------------------------------------------------------------------- groups off


def test_groups_off_gives_todays_jobs():
    """Values pinned from the generators before the option existed."""
    s = load_scenario("dally-poisson-4rack")
    jobs = build_workload(s, Cluster(s.cluster), rng(s.seed))
    assert [(j.model, j.num_gpus, j.iterations, j.arrival_s) for j in jobs[:2]] == [
        ("mobilenetv3", 8, 443820.63703318714, 3744.8547085283267),
        ("resnet18", 4, 12189.052387548365, 7473.7686965518515),
    ]
    assert math.fsum(j.iterations for j in jobs) == 1036535972.3445097
    assert all(j.vc == j.user == j.job_name == "" for j in jobs)
    s = load_scenario("gavel-hetero-poisson")  # synthetic, iterations
    jobs = build_workload(s, Cluster(s.cluster), rng(s.seed))
    assert [(j.model, j.iterations) for j in jobs[:2]] == [("bert", 17306.0), ("gpt2", 10991.0)]
    assert math.fsum(j.iterations for j in jobs) == 8765296.0
    s = load_scenario("gavel-continuous-single")  # synthetic, log10_duration_min
    jobs = build_workload(s, Cluster(s.cluster), rng(s.seed))
    assert jobs[1].arrival_s == 7886.512798088921
    assert math.fsum(j.iterations for j in jobs) == pytest.approx(2102880583.3477519, rel=1e-12)


def test_preset_shares_the_groups_off_draws():
    """The groups' draws come after the generator's own: same arrivals as the plain preset."""
    plain, grouped = (load_scenario(f"dally-{k}poisson-4rack") for k in ("", "groups-"))
    assert grouped.workload.groups == WorkloadGroups()
    a = build_workload(plain, Cluster(plain.cluster), rng(1))
    b = build_workload(grouped, Cluster(grouped.cluster), rng(1))
    assert [j.arrival_s for j in a] == [j.arrival_s for j in b]
    assert all(j.vc and j.user and j.job_name for j in b)


# --------------------------------------------------------------------------- determinism


@pytest.mark.parametrize(
    "kind", ["dally", "synthetic-iterations", "synthetic-bands", "synthetic-point"]
)
def test_same_seed_same_jobs(cluster, kind):
    def make(seed: int) -> list[Job]:
        g = WorkloadGroups(num_vcs=4, habit=0.5)
        if kind == "dally":
            return gen.dally_jobs(300, cluster.num_gpus, rng(seed), arrival="poisson", groups=g)
        bands = {"synthetic-bands": BANDS, "synthetic-point": POINT_BANDS}.get(kind)
        return synthetic(300, cluster, seed, log10_duration_min=bands, groups=g)

    a, b, c = make(7), make(7), make(8)
    assert a == b
    assert a != c


# --------------------------------------------------------------------------- no signal


NO_SIGNAL = WorkloadGroups(r_vc=0.0, r_group=0.0, habit=0.0)


@pytest.mark.parametrize("bands", [None, BANDS, POINT_BANDS])
def test_no_signal_keeps_the_groups_off_jobs(cluster, bands):
    """With r_vc = r_group = habit = 0 a job is its groups-off self with labels."""
    if bands is None:
        off = gen.dally_jobs(2000, cluster.num_gpus, rng(5), arrival="poisson")
        on = gen.dally_jobs(2000, cluster.num_gpus, rng(5), arrival="poisson", groups=NO_SIGNAL)
    else:
        off = synthetic(2000, cluster, 5, log10_duration_min=bands)
        on = synthetic(2000, cluster, 5, log10_duration_min=bands, groups=NO_SIGNAL)
    for a, b in zip(off, on, strict=True):
        assert (a.model, a.num_gpus, a.arrival_s) == (b.model, b.num_gpus, b.arrival_s)
        assert b.duration_s == pytest.approx(a.duration_s, rel=1e-9)
    iters = synthetic(2000, cluster, 5, groups=NO_SIGNAL)
    assert [j.iterations for j in iters] == [j.iterations for j in synthetic(2000, cluster, 5)]


def test_no_signal_explains_nothing(cluster):
    jobs = gen.dally_jobs(N, cluster.num_gpus, rng(3), arrival="poisson", groups=NO_SIGNAL)
    assert abs(share(jobs, "job_name")) < 0.03
    assert abs(share(jobs, "vc")) < 0.01


# --------------------------------------------------------------------------- marginals


def test_dally_marginal_duration_kept(cluster, dally_default):
    logq = np.log(gen.DALLY_DURATION_QUANTILES_S)

    def cdf(x: np.ndarray) -> np.ndarray:
        return np.interp(np.log(x), logq, gen.DALLY_DURATION_LEVELS)

    off = gen.dally_jobs(N, cluster.num_gpus, rng(3), arrival="poisson")
    ks_off = stats.ks_1samp(durations(off), cdf).statistic
    ks_on = stats.ks_1samp(durations(dally_default), cdf).statistic
    assert ks_off < 0.015
    assert ks_on < 0.04  # jobs of a group are dependent: a smaller effective sample
    demand = np.array([j.num_gpus for j in dally_default])
    for g, p in zip(gen.DALLY_GPU_DEMANDS, gen.DALLY_DEMAND_PROBS, strict=True):
        assert np.mean(demand == g) == pytest.approx(p, abs=0.04)


def test_synthetic_marginals_kept(cluster):
    g = WorkloadGroups()
    jobs = synthetic(N, cluster, 4, log10_duration_min=BANDS, groups=g)
    x = np.log10(durations(jobs) / 60.0)

    def cdf(v: np.ndarray) -> np.ndarray:
        return 0.8 * np.clip((v - 1.5) / 1.5, 0, 1) + 0.2 * np.clip(v - 3.0, 0, 1)

    assert stats.ks_1samp(x, cdf).statistic < 0.04
    jobs = synthetic(N, cluster, 4, log10_duration_min=POINT_BANDS, groups=g)
    x = np.log10(durations(jobs) / 60.0)
    assert np.mean(np.isclose(x, 1.0, rtol=0, atol=1e-9)) == pytest.approx(0.3, abs=0.04)
    jobs = synthetic(N, cluster, 4, groups=g)
    iters = np.array([j.iterations for j in jobs])
    assert np.all((iters >= 100) & (iters <= 999) & (iters == np.floor(iters)))
    assert iters.mean() == pytest.approx(549.5, rel=0.04)
    assert np.mean(iters < 190) == pytest.approx(0.1, abs=0.03)


# --------------------------------------------------------------------------- signal


def test_signal_matches_the_shares(cluster, dally_default):
    g = WorkloadGroups()
    assert share(dally_default, "vc") == pytest.approx(g.r_vc, abs=0.06)
    assert share(dally_default, "job_name") == pytest.approx(g.r_vc + g.r_group, abs=0.06)
    strong = WorkloadGroups(num_vcs=4, r_vc=0.5, r_group=0.2, p_new_group=0.5)
    jobs = synthetic(N, cluster, 6, log10_duration_min=BANDS, groups=strong)
    assert share(jobs, "vc") == pytest.approx(0.5, abs=0.06)
    assert share(jobs, "job_name") == pytest.approx(0.7, abs=0.06)


def test_labels_and_nesting(dally_default):
    jobs = dally_default
    assert all(re.fullmatch(r"vc\d\d", j.vc) for j in jobs)
    assert all(re.fullmatch(r"u\d{3}", j.user) for j in jobs)
    assert all(re.fullmatch(r"g\d{4,}", j.job_name) for j in jobs)
    of_group: dict[str, set] = defaultdict(set)
    of_user: dict[str, set] = defaultdict(set)
    for j in jobs:
        of_group[j.job_name].add((j.vc, j.user))
        of_user[j.user].add(j.vc)
    assert all(len(v) == 1 for v in of_group.values())  # a group: one VC, one user
    assert all(len(v) == 1 for v in of_user.values())  # a user: one VC
    assert len({j.user for j in jobs}) <= len(grp.PHILLY_VC_SHARES) * grp.DEFAULT_USERS_PER_VC
    assert 0.15 < len(of_group) / len(jobs) < 0.35  # p_new_group = 0.25
    w = np.asarray(grp.PHILLY_VC_SHARES) / sum(grp.PHILLY_VC_SHARES)
    got = np.array([np.mean([j.vc == f"vc{k:02d}" for j in jobs]) for k in range(w.size)])
    np.testing.assert_allclose(got, w, atol=0.02)


def test_habit_and_equal_vcs(cluster):
    g = WorkloadGroups(num_vcs=3, habit=1.0)
    jobs = gen.dally_jobs(3000, cluster.num_gpus, rng(2), groups=g)
    config: dict[str, set] = defaultdict(set)
    for j in jobs:
        config[j.job_name].add((j.model, j.num_gpus))
    assert all(len(v) == 1 for v in config.values())
    assert sorted({j.vc for j in jobs}) == ["vc00", "vc01", "vc02"]
    assert all(np.mean([j.vc == v for j in jobs]) == pytest.approx(1 / 3, abs=0.04)
               for v in ("vc00", "vc01", "vc02"))  # fmt: skip
    one = gen.dally_jobs(200, cluster.num_gpus, rng(2), groups=WorkloadGroups(num_vcs=1, r_vc=0.5))
    assert {j.vc for j in one} == {"vc00"}


# --------------------------------------------------------------------------- config


@pytest.mark.parametrize(
    ("groups", "field"),
    [
        ({"r_vc": 1.5}, "r_vc"),
        ({"r_group": -0.1}, "r_group"),
        ({"r_vc": 0.6, "r_group": 0.5}, "r_vc + r_group"),
        ({"p_new_group": 0}, "p_new_group"),
        ({"habit": 2}, "habit"),
        ({"users_per_vc": 0}, "users_per_vc"),
        ({"num_vcs": 2, "vc_weights": [1, 2, 3]}, "vc_weights"),
        ({"vc_weights": []}, "vc_weights"),
        ({"vc_weights": [1, -1]}, "vc_weights"),
        ({"num_vcs": True}, "num_vcs"),
        ({"r_vcs": 0.1}, "r_vcs"),
    ],
)
def test_bad_groups_name_the_field(groups, field):
    with pytest.raises(ValidationError, match=re.escape(field)):
        WorkloadGroups(**groups)
    for kind in ("dally", "synthetic"):
        with pytest.raises(ConfigError, match=re.escape(field)):
            wl = {"kind": kind, "num_jobs": 5, "groups": groups}
            load_scenario({"cluster": "dally-2rack", "workload": wl})


# --------------------------------------------------------------------------- fit helpers


def test_history_predictor_uses_only_finished_jobs():
    arrival = np.array([0.0, 1.0, 5.0, 6.0, 20.0])
    duration = np.array([4.0, 2.0, 10.0, 1.0, 1.0])
    keys = ["a", "a", "a", "b", "a"]
    # job 2 arrives at 5: job 0 finished at 4 (< 5), job 1 at 3; job 3 has no finished "b";
    # job 4 at 20: jobs 0, 1, 2 finished (14 < 20)
    got = grp.history_predictor(arrival, duration, keys, last=2)
    np.testing.assert_allclose(got, [np.nan, np.nan, 3.0, np.nan, 7.0])
    assert grp.history_predictor(arrival, duration, keys, agg="median")[4] == 4.0
    with pytest.raises(ValueError, match="agg"):
        grp.history_predictor(arrival, duration, keys, agg="max")


def test_variance_share_known_values():
    y = np.array([0.0, 2.0, 10.0, 12.0])
    s = grp.variance_share(y, ["a", "a", "b", "b"])
    assert s.eta2 == pytest.approx(100 / 104)
    assert s.corrected == pytest.approx((100 - 1 * 2) / 104)  # MS_within = 4 / 2
    assert grp.variance_share(y, ["a"] * 4).corrected == 0.0

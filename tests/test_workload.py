"""Synthetic generators, the sizing of durations, and build_workload dispatch."""

from __future__ import annotations

import numpy as np
import pytest

from dlcluster_gym.cluster.topology import Cluster
from dlcluster_gym.config import load_scenario
from dlcluster_gym.errors import ConfigError, TraceError
from dlcluster_gym.scenario import sizing
from dlcluster_gym.scenario.build import build_workload
from dlcluster_gym.workload import generators as gen
from dlcluster_gym.workload.job import Job
from dlcluster_gym.workload.models import DALLY_MODELS, get_model
from dlcluster_gym.workload.traces import trace_root, traces_available


@pytest.fixture(scope="module")
def cluster() -> Cluster:
    return Cluster("dally-2rack")


def rng(seed: int = 0) -> np.random.Generator:
    return np.random.default_rng(seed)


def test_packed_shape():
    assert sizing._packed_shape(20, 8, 2) == ((8, 8), (4,))
    assert sizing._packed_shape(3, 8, 8) == ((3,),)
    assert sizing._spread_shape(4, "rack", 8, 8) == ((1, 1, 1, 1),)
    assert sizing._spread_shape(3, "network", 8, 8) == ((1,), (1,), (1,))
    assert sizing._spread_shape(20, "rack", 8, 2) == ((8, 8), (2, 2))


def test_fitted_constants_consistent():
    assert len(gen.DALLY_GPU_DEMANDS) == len(gen.DALLY_DEMAND_PROBS)
    assert sum(gen.DALLY_DEMAND_PROBS) == pytest.approx(1.0, abs=1e-3)
    assert len(gen.DALLY_DURATION_LEVELS) == len(gen.DALLY_DURATION_QUANTILES_S)
    assert np.all(np.diff(gen.DALLY_DURATION_QUANTILES_S) >= 0)
    assert gen.DALLY_DURATION_LEVELS[0] == 0 and gen.DALLY_DURATION_LEVELS[-1] == 1


def test_dally_deterministic(cluster):
    a = gen.dally_jobs(300, cluster.num_gpus, rng(7), arrival="poisson")
    b = gen.dally_jobs(300, cluster.num_gpus, rng(7), arrival="poisson")
    c = gen.dally_jobs(300, cluster.num_gpus, rng(8), arrival="poisson")
    assert a == b
    assert a != c


def test_dally_batch_demands_and_models(cluster):
    jobs = gen.dally_jobs(2000, cluster.num_gpus, rng(), arrival="batch")
    assert all(j.arrival_s == 0 for j in jobs)
    demands = {j.num_gpus for j in jobs}
    assert demands <= {2, 4, 8, 16, 32, 64}
    assert {2, 4, 8} <= demands
    assert {j.model for j in jobs} == set(DALLY_MODELS)
    # the length is the run time at packed consolidation, inside the fitted table
    assert all(j.iterations is None for j in jobs)
    run = np.array([j.duration_s for j in jobs])
    assert run.min() >= gen.DALLY_DURATION_QUANTILES_S[0] - 1e-6
    assert run.max() <= gen.DALLY_DURATION_QUANTILES_S[-1] + 1e-6
    # sized for the cluster, a job placed packed runs exactly its duration
    sized = sizing.size_jobs(jobs[:50], cluster)
    for j, s in zip(jobs[:50], sized, strict=True):
        t = sizing.iteration_time_s(get_model(j.model), j.num_gpus, cluster)
        assert s.duration_s is None and s.iterations * t == pytest.approx(j.duration_s)


def test_dally_duration_sampler_mean():
    d = gen.sample_dally_durations(400_000, rng(1))
    assert d.mean() == pytest.approx(gen.dally_mean_duration_s(), rel=0.02)
    assert np.median(d) == pytest.approx(gen.DALLY_DURATION_QUANTILES_S[10], rel=0.02)


def test_poisson_rate_matches_target_load(cluster):
    n = 20_000
    jobs = gen.dally_jobs(n, cluster.num_gpus, rng(3), arrival="poisson", load=0.9)
    span = jobs[-1].arrival_s
    expected_rate_s = 0.9 * cluster.num_gpus / gen.dally_mean_gpu_seconds()
    assert n / span == pytest.approx(expected_rate_s, rel=0.03)
    # offered load measured from the jobs themselves (heavy tail: loose tolerance)
    work = sum(j.num_gpus * j.duration_s for j in jobs)
    assert work / (cluster.num_gpus * span) == pytest.approx(0.9, rel=0.1)


def test_poisson_explicit_rate(cluster):
    jobs = gen.dally_jobs(5000, cluster.num_gpus, rng(4), arrival="poisson", rate_per_hour=10.0)
    assert 5000 / (jobs[-1].arrival_s / 3600) == pytest.approx(10.0, rel=0.05)
    arr = [j.arrival_s for j in jobs]
    assert arr == sorted(arr)


def test_arrival_errors():
    with pytest.raises(ConfigError):
        gen.make_arrivals(3, "poisson", rng(), num_gpus=8, mean_gpu_seconds=1.0)
    with pytest.raises(ConfigError):
        gen.make_arrivals(3, "weibull", rng(), num_gpus=8, mean_gpu_seconds=1.0)
    with pytest.raises(ConfigError):
        gen.rate_for_load(-1.0, 8, 1.0)


def test_synthetic_load_and_weights(cluster):
    kw = dict(
        models=("resnet50", "vgg11"),
        gpu_demands=(1, 8),
        gpu_demand_weights=(3.0, 1.0),
        iterations=(100, 300),
    )
    its = sizing.iteration_times(kw["models"], kw["gpu_demands"], cluster)
    jobs = gen.synthetic_jobs(20_000, cluster.num_gpus, rng(5), load=0.5, iteration_times=its,
                              **kw)  # fmt: skip
    assert jobs == gen.synthetic_jobs(
        20_000, cluster.num_gpus, rng(5), load=0.5, iteration_times=its, **kw
    )
    frac8 = np.mean([j.num_gpus == 8 for j in jobs])
    assert frac8 == pytest.approx(0.25, abs=0.02)
    assert all(100 <= j.iterations <= 300 and j.duration_s is None for j in jobs)
    work = sum(
        j.num_gpus * j.iterations * sizing.iteration_time_s(get_model(j.model), j.num_gpus,
                                                            cluster)
        for j in jobs
    )  # fmt: skip
    assert work / (cluster.num_gpus * jobs[-1].arrival_s) == pytest.approx(0.5, rel=0.05)
    with pytest.raises(ConfigError, match="gpu_demand_weights"):
        gen.synthetic_jobs(
            5, cluster.num_gpus, rng(), gpu_demands=(1, 2), gpu_demand_weights=(1.0,)
        )
    # jobs sized in iterations need their iteration times for the rate of an offered load
    with pytest.raises(ValueError, match="iteration_times"):
        gen.synthetic_jobs(5, cluster.num_gpus, rng(), load=0.5, **kw)
    with pytest.raises(ValueError, match="shape"):
        gen.synthetic_jobs(5, cluster.num_gpus, rng(), load=0.5, iteration_times=its[:1], **kw)
    batch = gen.synthetic_jobs(5, cluster.num_gpus, rng(), arrival="batch", **kw)
    assert all(j.arrival_s == 0 for j in batch)


def _scenario(workload: dict, **kw):
    return load_scenario({"cluster": "dally-2rack", "workload": workload, **kw})


def test_build_sorted_ids_and_max_jobs(cluster):
    s = _scenario({"kind": "dally", "num_jobs": 50, "arrival": "poisson", "max_jobs": 20})
    jobs = build_workload(s, cluster, rng(2))
    assert len(jobs) == 20
    assert [j.job_id for j in jobs] == list(range(20))
    assert [j.arrival_s for j in jobs] == sorted(j.arrival_s for j in jobs)
    assert jobs == build_workload(s, cluster, rng(2))


def test_build_keeps_oversize_jobs(cluster):
    s = _scenario({"kind": "synthetic", "num_jobs": 10, "gpu_demands": [512], "arrival": "batch"})
    jobs = build_workload(s, cluster, rng())
    assert len(jobs) == 10 and all(j.num_gpus == 512 for j in jobs)


TRACE = """job_id,num_gpu,submit_time,iterations,model_name,duration,interval
0,1,100,606,vgg11,164,30
1,8,130,133,resnet50,147,23
2,2,110,157,alexnet,127,26
3,2,110,150,resnet18,100,26
"""


def test_build_trace_models_and_iterations(tmp_path, cluster):
    (tmp_path / "t.csv").write_text(TRACE)
    base = {"kind": "trace", "format": "tiresias", "path": "t.csv"}
    jobs = build_workload(_scenario({**base, "models": "trace"}), cluster, rng(), tmp_path)
    assert [j.name for j in jobs] == ["0", "2", "3", "1"]  # by arrival, ties in file order
    assert [j.arrival_s for j in jobs] == [0.0, 10.0, 10.0, 30.0]  # rebased to first arrival
    assert [j.model for j in jobs] == ["vgg11", "alexnet", "resnet18", "resnet50"]
    assert [j.iterations for j in jobs] == [606, 157, 150, 133]
    # derived from duration at packed consolidation
    jobs = build_workload(
        _scenario({**base, "models": ["resnet50"], "iterations_from": "duration"}),
        cluster,
        rng(),
        tmp_path,
    )
    t = sizing.iteration_time_s(get_model("resnet50"), 8, cluster)
    assert jobs[-1].iterations == pytest.approx(147 / t)
    # network tier: slower iterations -> fewer iterations for the same duration
    net = build_workload(
        _scenario(
            {
                **base,
                "models": ["resnet50"],
                "iterations_from": "duration",
                "duration_tier": "network",
            }
        ),
        cluster,
        rng(),
        tmp_path,
    )
    assert net[-1].iterations <= jobs[-1].iterations
    dally = build_workload(_scenario({**base, "models": "dally"}), cluster, rng(1), tmp_path)
    assert {j.model for j in dally} <= set(DALLY_MODELS)
    assert dally == build_workload(
        _scenario({**base, "models": "dally"}), cluster, rng(1), tmp_path
    )


def test_build_trace_unknown_model(tmp_path, cluster):
    (tmp_path / "t.csv").write_text(TRACE.replace("resnet18", "notamodel"))
    s = _scenario({"kind": "trace", "format": "tiresias", "path": "t.csv", "models": "trace"})
    with pytest.raises(TraceError) as ei:
        build_workload(s, cluster, rng(), tmp_path)
    msg = str(ei.value)
    assert "line 5" in msg and "'notamodel'" in msg and "resnet50" in msg


def test_build_trace_without_model_column(tmp_path, cluster):
    (tmp_path / "r.csv").write_text("job_id,submission_time,duration,num_gpu\na,5,100,2\n")
    s = _scenario({"kind": "trace", "format": "itp-raw", "path": "r.csv", "models": "trace"})
    with pytest.raises(TraceError, match="no model_name column"):
        build_workload(s, cluster, rng(), tmp_path)


def test_build_missing_trace_names_path(tmp_path, cluster):
    s = _scenario({"kind": "trace", "format": "philly", "path": "none/philly.csv"})
    with pytest.raises(TraceError) as ei:
        build_workload(s, cluster, rng(), tmp_path)
    assert str(tmp_path / "none" / "philly.csv") in str(ei.value)


@pytest.mark.skipif(
    not traces_available(), reason="../shared/traces not found; set DLCLUSTER_TRACES"
)
@pytest.mark.traces
def test_fit_reproduces_constants():
    fit = gen.fit_dally_distributions(trace_root())
    assert fit.num_jobs_philly == gen.FIT_NUM_JOBS_PHILLY
    assert fit.num_jobs_itp == gen.FIT_NUM_JOBS_ITP
    assert fit.demand_probs == pytest.approx(gen.DALLY_DEMAND_PROBS, abs=1e-4)
    assert fit.duration_quantiles_s == pytest.approx(gen.DALLY_DURATION_QUANTILES_S, abs=1)


def test_synthetic_log10_minute_durations(cluster):
    # Gavel's generator: 10^x minutes, x uniform in [1.5, 3] for 80 % and in [3, 4] for 20 %
    bands = ((1.5, 3.0, 0.8), (3.0, 4.0, 0.2))
    kw = dict(models=("resnet50", "bert"), gpu_demands=(1, 4), log10_duration_min=bands)
    jobs = gen.synthetic_jobs(20_000, cluster.num_gpus, rng(7), load=0.5, **kw)
    assert jobs == gen.synthetic_jobs(20_000, cluster.num_gpus, rng(7), load=0.5, **kw)
    run = np.array([j.duration_s for j in jobs])
    x = np.log10(run / 60.0)
    assert x.min() >= 1.5 - 1e-9 and x.max() <= 4.0 + 1e-9
    assert np.mean(x > 3.0) == pytest.approx(0.2, abs=0.01)
    # E[10^x] in closed form: 0.8 (10^3 - 10^1.5) / (1.5 ln 10) + 0.2 (10^4 - 10^3) / ln 10
    mean_min = 0.8 * (1e3 - 10**1.5) / (1.5 * np.log(10)) + 0.2 * 9e3 / np.log(10)
    assert gen.log10_minutes_mean(bands) == pytest.approx(60.0 * mean_min)
    assert run.mean() == pytest.approx(60.0 * mean_min, rel=0.05)
    work = sum(j.num_gpus * r for j, r in zip(jobs, run, strict=True))
    assert work / (cluster.num_gpus * jobs[-1].arrival_s) == pytest.approx(0.5, rel=0.1)


def test_synthetic_log10_minute_bands_are_checked():
    with pytest.raises(ConfigError, match=r"log10_duration_min bands must be \[lo, hi, weight\]"):
        _scenario({"kind": "synthetic", "num_jobs": 5, "log10_duration_min": [[3.0, 2.0, 1.0]]})
    with pytest.raises(ConfigError, match="log10_duration_min"):
        _scenario({"kind": "synthetic", "num_jobs": 5, "log10_duration_min": [[1.0, 2.0, 0.0]]})


def test_job_length_is_iterations_or_duration():
    Job(0, "resnet50", 2, None, 0.1, 0.0, duration_s=60.0)
    Job(0, "resnet50", 2, 10.0, 0.1, 0.0)
    with pytest.raises(ConfigError, match="exactly one"):
        Job(0, "resnet50", 2, None, 0.1, 0.0)
    with pytest.raises(ConfigError, match="exactly one"):
        Job(0, "resnet50", 2, 10.0, 0.1, 0.0, duration_s=60.0)
    with pytest.raises(ConfigError, match="duration_s must be finite and > 0"):
        Job(0, "resnet50", 2, None, 0.1, 0.0, duration_s=-1.0)
    with pytest.raises(ConfigError, match="not yet converted to iterations"):
        _ = Job(0, "resnet50", 2, None, 0.1, 0.0, duration_s=60.0).ideal_run_s


def test_size_jobs_per_network_model(cluster):
    prof = get_model("resnet50")
    jobs = [
        Job(0, "resnet50", 8, None, prof.compute_s, 0.0, duration_s=600.0),
        Job(1, "resnet50", 8, 123.0, prof.compute_s, 0.0),
    ]
    packed = sizing.size_jobs(jobs, cluster)
    assert packed[0].iterations == 600.0 / sizing.iteration_time_s(prof, 8, cluster)
    assert packed[1] is jobs[1]  # a job with iterations keeps them
    spread = sizing.size_jobs(jobs, cluster, tier="network")
    assert spread[0].iterations == 600.0 / sizing.iteration_time_s(prof, 8, cluster, "network")
    assert spread[0].iterations < packed[0].iterations
    ideal = sizing.size_jobs(jobs, cluster, network="ideal")
    assert ideal[0].iterations == 600.0 / prof.compute_s
    assert all(j.duration_s is None for j in packed + spread + ideal)


def test_engine_refuses_a_duration_job(cluster):
    from dlcluster_gym.scheduler import make_policy
    from dlcluster_gym.sim.engine import Engine

    s = _scenario({"kind": "dally", "num_jobs": 2})
    job = Job(0, "resnet50", 2, None, 0.1, 0.0, duration_s=60.0)
    with pytest.raises(ConfigError, match="size_jobs"):
        Engine(s, cluster, [job], make_policy("fcfs"), rng())

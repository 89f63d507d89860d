"""Per-GPU-type compute speed of ordinary jobs (perf.gpu_speed): the roofline factor by hand,
the engine running a job at its GPU type's speed (the slowest type when mixed), Gavel's
heterogeneity-aware profile choosing by it, and the ideal bound on the fastest type."""

from __future__ import annotations

import numpy as np
import pytest

from dlcluster_gym.baselines.gavel import Gavel, GavelLAS, GavelLASAgnostic
from dlcluster_gym.config import load_scenario
from dlcluster_gym.errors import ConfigError
from dlcluster_gym.perf.gpu_speed import compute_scale, type_scales
from dlcluster_gym.sim.actions import Start
from dlcluster_gym.sim.bounds import ideal_results
from dlcluster_gym.workload.job import Job
from tests.test_crius import HETERO, _engine, _Scripted

# A40: 149.7 TFLOPS fp16, 696 GB/s; A10: 125.0 TFLOPS, 600 GB/s (data sheets)
A10_CNN = 0.075 * 149.7 / 125.0 + 0.925 * 696.0 / 600.0  # 1.16281
A10_REC = 696.0 / 600.0  # 1.16: memory-bound


def test_compute_scale_by_hand():
    assert compute_scale("cnn", "A10", "A40") == pytest.approx(A10_CNN)
    assert compute_scale("recommendation", "A10", "A40") == pytest.approx(A10_REC)
    assert compute_scale("cnn", "A40", "A40") == 1.0
    # V100 vs K80: 125 / 4.4 TFLOPS and 900 / 240 GB/s
    assert compute_scale("cnn", "K80", "V100") == pytest.approx(0.075 * 125 / 4.4 + 0.925 * 3.75)
    np.testing.assert_allclose(type_scales("cnn", ("A40", "A10")), [1.0, A10_CNN])


# Gavel's measured single-GPU speed ratios (public repository, geometric mean over every
# batch size): V100 over K80 and over P100, for its convolutional networks and its language
# models (Transformer, LM). The fitted shares reproduce them within these bounds.
MEASURED = {
    ("cnn", "K80"): 6.59,
    ("cnn", "P100"): 1.32,
    ("nlp", "K80"): 3.78,
    ("nlp", "P100"): 1.27,
}


@pytest.mark.parametrize(("family", "gpu"), list(MEASURED))
def test_fitted_shares_match_measured_speed_ratios(family, gpu):
    tol = {"cnn": 0.25, "nlp": 0.05}[family]  # the CNNs' batch sizes spread 3.4x-11.6x
    assert compute_scale(family, gpu, "V100") == pytest.approx(MEASURED[family, gpu], rel=tol)


@pytest.mark.parametrize(
    ("gpus", "factor"), [((0,), 1.0), ((4,), A10_CNN), ((0, 4), A10_CNN), ((0, 1), 1.0)]
)
def test_an_ordinary_job_runs_at_its_slowest_gpu_types_speed(gpus, factor):
    # network ideal: an iteration is its compute alone; 1000 iterations of 1 s on the A40
    # (the reference type), the demand's compute split over its GPUs (data parallel)
    job = Job(0, "resnet50", len(gpus), 1000.0, 1.0, 0.0)
    res = _engine([job], _Scripted({0: [Start(0, gpus)]}), network="ideal").run()
    assert res.jobs["finish_s"][0] == pytest.approx(1000.0 * factor)
    assert res.jobs["compute_s"][0] == pytest.approx(1000.0 * factor)


def test_communication_does_not_scale_with_the_gpu_type():
    # the same 2-GPU placement shape on each type: the runs differ by the compute alone
    runs = {}
    for gpus in ((0, 2), (4, 6)):  # two machines of one type each
        job = Job(0, "resnet50", 2, 1000.0, 1.0, 0.0)
        res = _engine([job], _Scripted({0: [Start(0, gpus)]})).run()
        runs[gpus] = (float(res.jobs["comm_s"][0]), float(res.jobs["compute_s"][0]))
    assert runs[(0, 2)][1] == pytest.approx(1000.0)
    assert runs[(4, 6)][1] == pytest.approx(1000.0 * A10_CNN)
    assert runs[(0, 2)][0] > 0
    # both cross the rack tier's 100 Gb/s links: the same communication on either type,
    # not multiplied by the compute factor
    assert runs[(4, 6)][0] == pytest.approx(runs[(0, 2)][0], rel=1e-12)


def test_gavel_puts_the_job_that_gains_most_on_the_fast_type():
    # one GPU of each type free for two 1-GPU jobs arriving together: the CNN gains
    # 1 / 1.16281 on the A40 where the recommendation model gains 1 / 1.16, so the
    # total-throughput policy keeps the CNN on the A40 (type 0) and the other on the A10
    jobs = [Job(0, "dlrm", 1, 3000.0, 1.0, 0.0), Job(1, "resnet50", 1, 3000.0, 1.0, 0.0)]
    spec = {**HETERO, "cluster": {**HETERO["cluster"], "groups": [
        {**g, "machines_per_rack": 1, "gpus_per_machine": 1} for g in HETERO["cluster"]["groups"]
    ]}, "network": "ideal"}  # fmt: skip
    from dlcluster_gym.cluster.topology import Cluster
    from dlcluster_gym.sim.engine import Engine

    sc = load_scenario(spec)
    eng = Engine(sc, Cluster(sc.cluster), jobs, Gavel(round_s=60.0), np.random.default_rng(0),
                 record_events=True)  # fmt: skip
    res = eng.run()
    moves = [
        (e["t"], e["job"], e["gpus"]) for e in res.events if e["event"] in ("start", "migrate")
    ]
    assert [m[1:] for m in moves[:2]] == [(0, [1]), (1, [0])]
    # the CNN keeps its A40 to the end; then the other job takes it (at a round boundary)
    assert [m[1:] for m in moves[2:]] == [(0, [0])]
    assert moves[2][0] >= res.jobs["finish_s"][1]
    assert eng.type_scale is not None
    assert eng.type_scale[0, 1] == pytest.approx(compute_scale("recommendation", "A10", "A40"))


def test_the_agnostic_variant_profiles_every_type_alike():
    policy = GavelLASAgnostic()
    assert policy.params["heterogeneity"] == "agnostic" and not policy.aware
    with pytest.raises(ConfigError, match="heterogeneity must be one of aware, agnostic"):
        GavelLAS(heterogeneity="blind")


def test_the_ideal_bound_runs_each_job_on_its_fastest_type():
    sc = load_scenario({**HETERO, "network": "ideal"})
    from dlcluster_gym.cluster.topology import Cluster

    cluster = Cluster(sc.cluster)
    jobs = [Job(0, "resnet50", 1, 100.0, 1.0, 0.0), Job(1, "resnet50", 1, 100.0, 1.0, 0.0,
                                                        gpu_type="A10")]  # fmt: skip
    res = ideal_results(sc, cluster, jobs)
    np.testing.assert_allclose(res.jobs["jct_s"], [100.0, 100.0 * A10_CNN])

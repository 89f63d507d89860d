"""perf.parallelism: plans, memory, Crius 5.1 pipeline latency, Cells, Fig. 3-4 findings."""

from __future__ import annotations

import itertools
import math

import numpy as np
import pytest

from dlcluster_gym.cluster.catalog import interconnect
from dlcluster_gym.cluster.topology import Cluster
from dlcluster_gym.config import load_cluster
from dlcluster_gym.errors import ConfigError, UnknownNameError
from dlcluster_gym.perf import parallelism as par
from dlcluster_gym.workload.large_models import LARGE_MODELS, parse_large_model
from dlcluster_gym.workload.models import get_model

A100 = par.Hardware.of("A100", 4, interconnect("nvlink"), interconnect("ib-100"))
V100 = par.Hardware.of("V100", 4, interconnect("nvlink"), interconnect("ib-100"))
A100_PCIE = par.Hardware.of("A100", 4, interconnect("pcie4"), interconnect("ib-100"))
A10 = par.Hardware.of("A10", 2, interconnect("pcie4"), interconnect("ib-200"))


@pytest.mark.parametrize("name", sorted(LARGE_MODELS))
def test_table2_parameter_counts_within_10_percent(name):
    m = LARGE_MODELS[name]
    assert m.params / 1e9 == pytest.approx(m.nominal_params_b, rel=0.10)


def test_names_batches_and_zoo_entries():
    model, bs = parse_large_model("BERT-1.3b-bs512")
    assert (model.name, bs) == ("bert-1.3b", 512)
    assert parse_large_model("moe-27b")[1] == 512  # middle Table 2 batch
    with pytest.raises(ConfigError, match=r"global batch 300 is not one of .*128, 256, 512"):
        parse_large_model("bert-1.3b-bs300")
    with pytest.raises(UnknownNameError, match=r"bert-0\.76b"):
        parse_large_model("bert-9b")
    assert get_model("wresnet-2b").parallelism == "model"
    assert get_model("moe-10b-bs1024").batch_size == 1024


def test_stage_bounds_balance_flops_and_cover_all_layers():
    for s in par.stage_choices("bert-2.6b", 16):
        b = par.stage_bounds("bert-2.6b", s)
        assert b[0] == 0 and b[-1] == LARGE_MODELS["bert-2.6b"].num_layers
        assert all(x < y for x, y in itertools.pairwise(b))
    f = LARGE_MODELS["bert-2.6b"].layers.fwd_flops
    b = par.stage_bounds("bert-2.6b", 4)
    share = np.array([f[b[i] : b[i + 1]].sum() for i in range(4)]) / f.sum()
    assert np.all(np.abs(share - 0.25) < 0.06)


def test_pipeline_latency_formula_of_5_1():
    """iter = sum_i (C_i + X_i) + (B - 1) max_i C_i + max_i AR_i, B = 4 x stages."""
    tab = par._stage_table("bert-1.3b", A100, 8, 2)
    choice = np.array([0, 0])  # data-only on both stages
    C = tab.comp[[0, 1], choice] + tab.coll[[0, 1], choice]
    expected = C.sum() + tab.xfer.sum() + (tab.microbatches - 1) * C.max() + tab.ar[[0, 1], 0].max()
    plan = par.evaluate("bert-1.3b", A100, 8, ((4, 1), (4, 1)))
    assert tab.microbatches == 8
    assert plan.iter_time_s == pytest.approx(expected, rel=1e-12)
    assert plan.compute_s < plan.iter_time_s


def test_exhaustive_search_matches_brute_force():
    """The threshold search equals enumerating every per-stage split."""
    import itertools

    for model, n, s in (("bert-1.3b", 16, 4), ("moe-1.3b", 8, 2), ("wresnet-1b", 8, 4)):
        g = n // s
        splits = [(g // t, t) for t in par._tensor_options(g).tolist()]
        best = min(
            par.evaluate(model, A100, n, combo).iter_time_s
            for combo in itertools.product(splits, repeat=s)
        )
        got = par.best_in_stages(model, A100, n, s)
        assert got is not None and got.iter_time_s == pytest.approx(best, rel=1e-12)


def test_oom_plans_are_infeasible_and_memory_falls_with_sharding():
    # bert-6.7b: 6.7 B x 16 B of weights and optimizer state cannot fit on one 24 GB A10.
    assert par.best_plan("bert-6.7b", A10, 1) is None
    assert math.isinf(par.evaluate("bert-6.7b", A10, 1, ((1, 1),)).iter_time_s)
    dp = par.evaluate("bert-2.6b", A100, 4, ((4, 1),))
    tp = par.evaluate("bert-2.6b", A100, 4, ((1, 4),))
    assert tp.memory_B[0] < dp.memory_B[0]  # data parallelism needs more memory (8.3)
    assert par.min_feasible_gpus("bert-6.7b", A10, 64) == 8


def test_fig4a_moe_scales_near_linearly_others_saturate():
    """Crius Fig. 4(a): MoE-1.3B scales up (near) linearly, the others approach a ceiling."""

    def efficiency(model: str) -> float:
        t4, t16 = par.iteration_time(model, A100, 4), par.iteration_time(model, A100, 16)
        return (t4 / t16) / 4.0

    assert efficiency("moe-1.3b") >= 0.85
    for model in ("bert-1.3b", "wresnet-2b"):
        assert efficiency(model) <= 0.75
        assert efficiency(model) < efficiency("moe-1.3b") - 0.15


def test_fig3b_bert_on_v100_forced_into_tensor_parallelism():
    """Crius 2.2 / Fig. 3(b): 4 A100s over PCIe vs 4 V100s over NVLink. On the V100s memory
    pushes BERT into tensor parallelism (other plans need activation recomputation), and it is
    no faster than the compute ratio says."""
    a100 = par.best_plan("bert-6.7b", A100_PCIE, 4)
    v100 = par.best_plan("bert-6.7b", V100, 4)
    assert a100 is not None and v100 is not None
    assert all(t == 1 for _, t in a100.splits)
    assert any(t > 1 for _, t in v100.splits)
    # without tensor parallelism the V100 plans only fit with activation recomputation
    for s in par.stage_choices("bert-6.7b", 4):
        g = 4 // s
        no_tp = par.evaluate("bert-6.7b", V100, 4, ((g, 1),) * s)
        assert no_tp.iter_time_s > v100.iter_time_s
    peak_ratio = V100.gpu.fp16_tflops / A100.gpu.fp16_tflops
    assert a100.iter_time_s / v100.iter_time_s <= peak_ratio * 1.15


def test_cells_estimate_within_a_plan_space_and_tuning_prunes():
    for model, n in (("bert-2.6b", 16), ("moe-10b", 16), ("wresnet-4b", 8)):
        for s in par.stage_choices(model, n):
            full = par.best_in_stages(model, A100, n, s)
            est = par.cell_estimate(model, A100, n, s)
            tuned = par.cell_tune(model, A100, n, s)
            if est is None:
                continue
            assert full is not None and tuned is not None
            # the estimate samples the Cell; tuning searches a superset of the sample
            assert full.iter_time_s <= tuned.iter_time_s <= est.iter_time_s + 1e-12
            assert all(t in (1, n // s) for _, t in est.splits)
            pruned = par.plan_space_size(model, A100, n, s, pruned_by=est)
            assert pruned < par.plan_space_size(model, A100, n, s) or n // s <= 2


def test_best_plan_is_cached_and_bad_counts_raise():
    par.best_plan("moe-2.4b", A100, 8)
    hits = par.best_plan.cache_info().hits
    par.best_plan("moe-2.4b", A100, 8)
    assert par.best_plan.cache_info().hits == hits + 1
    with pytest.raises(ConfigError, match="positive integer"):
        par.best_plan("moe-2.4b", A100, 0)


def test_cluster_hardware_reads_groups_and_unknown_gpu_type_lists_known():
    c = Cluster("crius-sim-1280gpu")
    hw = par.cluster_hardware(c)
    assert [h.name for h in hw] == ["A100", "A40", "A10", "V100"]
    assert [h.gpus_per_node for h in hw] == [4, 2, 2, 16]
    assert hw[2].nic.bandwidth_Bps == 200e9 / 8 and hw[0].intra.name == "nvlink"
    assert c.num_gpus == 1280 and list(c.type_num_gpus) == [320] * 4
    bad = {"groups": [{"racks": 1, "machines_per_rack": 1, "gpus_per_machine": 2,
                       "gpu_type": "B200"}]}  # fmt: skip
    with pytest.raises(ConfigError, match=r"unknown GPU type 'B200'; known: .*A10.*V100"):
        load_cluster(bad)

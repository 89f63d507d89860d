"""Cassini / HotNets testbed profiles and `dlcluster compat` (Cassini Table 4.3, HotNets Table 1).

Paper numbers are written out here on purpose (not read from ``perf.testbed``), so that the
acceptance criteria do not move with the calibration.
"""

from __future__ import annotations

import json
import math
import subprocess
import sys
from pathlib import Path

import pytest
from click.testing import CliRunner

from dlcluster_gym.cli import main
from dlcluster_gym.errors import ConfigError, UnknownNameError
from dlcluster_gym.perf import testbed as tb  # module import: its test* names are not tests
from dlcluster_gym.perf.geometry import (
    CommProfile,
    compatibility_score,
    link_compatibility,
    unified_circle,
)
from dlcluster_gym.perf.testbed import (
    JobSpec,
    get_profiled_model,
    job_keys,
    link_report,
    parse_job_specs,
    shared_link_iteration_times,
)

MS = 1e-3
SCRIPT = Path(__file__).resolve().parents[1] / "experiments" / "reproductions" / "cassini_compat.py"

# Cassini thesis Table 4.3: (jobs, compatibility score, time shifts in ms).
TABLE_4_3 = [
    ("wide-resnet101:800,vgg16:1400", 1.0, (0, 150)),
    ("vgg19:1400,vgg16:1700,resnet50:1600", 1.0, (0, 158, 46)),
    ("vgg19:1024,vgg16:1200", 0.9, (0, 100)),
    ("roberta:12,roberta:12", 0.8, (0, 60)),
    ("bert:8,vgg19:1400,wide-resnet101:800", 0.6, (0, 42, 191)),
]
# HotNets'22 Table 1: (jobs, fully compatible).
TABLE_1 = [
    ("bert:8,vgg19:1200", False),
    ("dlrm:2000,dlrm:2000", True),
    ("bert:8,vgg19:1400,wide-resnet101:800", False),
    ("wide-resnet101:800,vgg16:1400", True),
    ("vgg19:1400,vgg16:1700,resnet50:1600", True),
]
COMPATIBLE_AT = (
    0.99  # experiments/reproductions/cassini_compat.py: "fully compatible" up to discretisation
)


def run(*args: str):
    return CliRunner().invoke(main, ["compat", *args])


def compat_json(jobs: str, *extra: str) -> dict:
    r = run("--jobs", jobs, "--format", "json", *extra)
    assert r.exit_code == 0, r.output
    return json.loads(r.stdout)


# ----------------------------------------------------------------------------- acceptance


@pytest.mark.parametrize(("jobs", "paper", "paper_shifts"), TABLE_4_3)
def test_table_4_3_snapshots_through_the_cli_score_within_0_1_of_the_paper(
    jobs, paper, paper_shifts
):
    out = compat_json(jobs)
    assert abs(out["score"] - paper) <= 0.1, (jobs, out["score"], paper)
    shifts = list(out["shifts_ms"].values())
    assert len(shifts) == len(paper_shifts)
    assert shifts[0] == 0.0  # the first job is the reference


@pytest.mark.parametrize(("jobs", "compatible"), TABLE_1)
def test_hotnets_table_1_groups_are_classified_as_in_the_paper(jobs, compatible):
    score = link_report(parse_job_specs(jobs))["score"]
    assert (score >= COMPATIBLE_AT) == compatible, (jobs, score)


def test_fully_compatible_groups_score_exactly_one_and_the_others_clearly_less():
    scores = {jobs: link_report(parse_job_specs(jobs))["score"] for jobs, _ in TABLE_1}
    assert all(scores[j] == 1.0 for j, c in TABLE_1 if c)
    assert all(scores[j] < 0.9 for j, c in TABLE_1 if not c)


@pytest.mark.parametrize(
    ("a", "b", "compatible"),
    [
        ("gpt1", "gpt2", True),
        ("gpt3", "dlrm", True),
        ("gpt3", "gpt2", False),
        ("gpt1", "dlrm", False),
    ],
)
def test_thesis_4_5_4_model_parallel_pairs(a, b, compatible):
    res = link_compatibility([tb.testbed_profile(a), tb.testbed_profile(b)])
    assert (res.score == 1.0) if compatible else (res.score < 0.95)


def test_the_papers_shifts_are_optimal_for_our_profiles_too():
    # 4.2: "shifting VGG16 by 150 ms enables perfect interleaving" with WideResNet101; the
    # optimum is a window of shifts, our search may return another point of it
    for jobs, _, paper_shifts in TABLE_4_3:
        profiles = [tb.testbed_profile(s.model, s.batch) for s in tb.parse_job_specs(jobs)]
        circle = unified_circle(profiles)
        rotations = [round(ms * MS / circle.sector_s) for ms in paper_shifts]
        best = link_compatibility(profiles).score
        assert compatibility_score(circle, rotations) == pytest.approx(best, abs=0.01), jobs


# ----------------------------------------------------------------------------- json format


def test_json_output_format_exactly():
    r = run("--jobs", "wide-resnet101:800,vgg16:1400", "--format", "json")
    assert r.exit_code == 0, r.output
    assert r.stdout.count("\n") == 1 and r.stdout.endswith("\n")
    out = json.loads(r.stdout)
    assert list(out) == ["score", "shifts_ms", "perimeter_ms"]
    assert isinstance(out["score"], float)
    assert isinstance(out["perimeter_ms"], float)
    assert list(out["shifts_ms"]) == ["wide-resnet101:800", "vgg16:1400"]
    assert all(isinstance(v, float) for v in out["shifts_ms"].values())
    assert out["score"] == 1.0
    assert out["perimeter_ms"] == 280.0  # both jobs quantise to 56 sectors of 5 ms
    # WRN's Up is [155, 280) ms, VGG16's [164.5, 278.5): VGG16 must be delayed into [114, 155]
    assert out["shifts_ms"]["wide-resnet101:800"] == 0.0
    assert 114.0 <= out["shifts_ms"]["vgg16:1400"] <= 155.0


def test_repeated_jobs_get_numbered_keys_and_names_are_canonical():
    out = compat_json("RoBERTa:12,roberta:12,ROBERTA:12,WRN:800")
    assert list(out["shifts_ms"]) == [
        "roberta:12",
        "roberta:12#2",
        "roberta:12#3",
        "wide-resnet101:800",
    ]
    assert job_keys([JobSpec("x", 1), JobSpec("y", 1), JobSpec("x", 1)]) == ["x:1", "y:1", "x:1#2"]


def test_a_bare_model_uses_its_reference_batch():
    assert compat_json("vgg16,gpt2") == compat_json("vgg16:1200,gpt2-medium:32")


def test_table_format_shows_jobs_score_and_circle():
    r = run("--jobs", "roberta:12,roberta:12")
    assert r.exit_code == 0, r.output
    assert "roberta:12#2" in r.stdout
    assert "compatibility score 0.800" in r.stdout
    assert "unified circle 200 ms" in r.stdout


def test_cli_is_deterministic():
    jobs = "gpt1:32,gpt2:32,gpt3:16,dlrm:2000"  # four jobs: the seeded descent search
    assert compat_json(jobs) == compat_json(jobs)
    assert link_report(parse_job_specs(jobs)) == link_report(parse_job_specs(jobs))


def test_link_speed_scales_demands_not_durations():
    slow = compat_json("bert:8,vgg19:1200")
    fast = compat_json("bert:8,vgg19:1200", "--link-gbps", "100")
    assert fast["score"] == 1.0 > slow["score"]  # 37.5 + 35 Gb/s fit in 100 Gb/s
    assert fast["perimeter_ms"] == slow["perimeter_ms"]
    p50, p100 = tb.testbed_profile("vgg16", 1400), tb.testbed_profile("vgg16", 1400, link_gbps=100)
    assert p100.iteration_time == p50.iteration_time
    assert p50.peak_demand == pytest.approx(0.7)
    assert p100.peak_demand == pytest.approx(0.35)


# ----------------------------------------------------------------------------- bad input


@pytest.mark.parametrize(
    ("args", "needle"),
    [
        (["--jobs", "resnet9000:64"], "error: unknown model 'resnet9000'"),
        (["--jobs", "alexnet:64"], "error: unknown model 'alexnet'"),  # zoo model, not testbed
        (["--jobs", "vgg16:abc"], "malformed job spec 'vgg16:abc'"),
        (["--jobs", "vgg16:1400:2"], "malformed job spec 'vgg16:1400:2'"),
        (["--jobs", ":1400"], "malformed job spec ':1400'"),
        (["--jobs", "vgg16:1400,,bert:8"], "malformed job spec ''"),
        (["--jobs", "vgg16:-5"], "malformed job spec 'vgg16:-5'"),
        (["--jobs", " "], "no jobs given"),
        (["--jobs", "vgg16:99999"], "outside its documented range 512-1800"),
        (["--jobs", "bert:0"], "outside its documented range 8-32"),
        (["--jobs", "vgg16:1400", "--link-gbps", "0"], "link speed must be"),
        (["--jobs", "vgg16:1400", "--link-gbps", "-50"], "link speed must be"),
        (["--jobs", "vgg16:1400", "--link-gbps", "nan"], "link speed must be"),
        (["--jobs", "vgg16:1400", "--link-gbps", "inf"], "link speed must be"),
        (["--jobs", "vgg16:1400,bert:8", "--link-gbps", "36"], "bert:8 sends at 37.5 Gb/s"),
    ],
)
def test_bad_input_exits_2_with_a_clear_message(args, needle):
    r = run(*args)
    assert r.exit_code == 2, r.output
    assert needle in r.stderr
    assert r.stderr.startswith("error: ") or "Error" in r.stderr


def test_unknown_model_lists_the_testbed_models():
    r = run("--jobs", "foo:1")
    assert r.exit_code == 2
    assert "valid models: " + ", ".join(tb.testbed_models()) in r.stderr


def test_a_job_faster_than_the_link_names_the_rates():
    r = run("--jobs", "vgg16:1400", "--link-gbps", "20")
    assert r.exit_code == 2
    assert "35 Gb/s" in r.stderr and "20 Gb/s link" in r.stderr and "at least 35" in r.stderr


def test_missing_jobs_and_bad_format_are_usage_errors():
    assert run().exit_code == 2
    assert run("--jobs", "vgg16:1400", "--format", "xml").exit_code == 2
    assert run("--jobs", "vgg16:1400", "--link-gbps", "fast").exit_code == 2


def test_api_errors():
    with pytest.raises(UnknownNameError, match="unknown model 'nope'"):
        tb.testbed_profile("nope")
    with pytest.raises(ConfigError, match="must be an integer"):
        tb.testbed_profile("vgg16", 1400.0)  # type: ignore[arg-type]
    with pytest.raises(ConfigError, match="must be an integer"):
        tb.testbed_profile("vgg16", True)  # type: ignore[arg-type]
    with pytest.raises(ConfigError, match="outside its documented range 4-32"):
        tb.testbed_profile("xlm", 64)
    with pytest.raises(ConfigError, match="link speed"):
        tb.testbed_profile("vgg16", link_gbps=-1.0)
    with pytest.raises(ConfigError, match="no jobs"):
        link_report([])


# ----------------------------------------------------------------------------- profiles


def test_vgg16_anchor_is_255_ms_with_141_ms_compute():
    # HotNets sec. 3 / thesis 4.3: 255 ms iteration, the first 141 ms pure computation
    p = tb.testbed_profile("vgg16")
    assert p.iteration_time == pytest.approx(0.255)
    down, up = p.phases
    assert (down.start, down.duration, down.demand) == (0.0, pytest.approx(0.141), 0.0)
    assert up.start == pytest.approx(0.141) and up.end == pytest.approx(0.255)
    assert p == tb.testbed_profile("VGG-16", 1200, 50.0)
    m = get_profiled_model("vgg16")
    assert (m.iteration_ms(), m.compute_ms(), m.up_ms) == (255.0, 141.0, 114.0)


def test_batch_scales_compute_linearly_and_leaves_communication_alone():
    m = get_profiled_model("vgg16")
    for batch in (512, 600, 1400, 1800):
        p = tb.testbed_profile("vgg16", batch)
        assert p.phases[0].duration == pytest.approx(0.141 * batch / 1200)
        assert p.phases[1].duration == pytest.approx(0.114)
        assert p.mean_demand * p.iteration_time == pytest.approx(0.114 * 0.7)  # bytes/iter
        assert m.compute_ms(batch) == pytest.approx(141 * batch / 1200)
    # multi-phase: every Down segment scales, every Up segment keeps duration and rate
    ref, half = (
        get_profiled_model("dlrm").segments,
        get_profiled_model("dlrm").scaled_segments(1000),
    )
    for (d0, r0), (d1, r1) in zip(ref, half, strict=True):
        assert r1 == r0
        assert d1 == (d0 / 2 if r0 == 0 else d0)


@pytest.mark.parametrize("name", tb.testbed_models())
def test_every_model_profile_is_consistent(name):
    m = get_profiled_model(name)
    lo, hi = m.batch_range
    assert lo <= m.reference_batch <= hi
    for batch in (lo, m.reference_batch, hi):
        p = tb.testbed_profile(name, batch)
        assert p.name == f"{name}:{batch}"
        assert p.iteration_time == pytest.approx(m.iteration_ms(batch) * MS)
        assert p.peak_demand == pytest.approx(m.peak_gbps / 50.0)
        assert p.peak_demand <= 1.0
    assert (m.parallelism == "model") == (len(m.segments) > 2)
    assert m.source


def test_model_parallel_profiles_have_several_up_phases():
    for name in ("gpt1", "gpt2-medium", "gpt3", "dlrm"):
        ups = [p for p in tb.testbed_profile(name).phases if p.demand > 0]
        assert len(ups) >= 2, name
    assert len([p for p in tb.testbed_profile("gpt3").phases if p.demand > 0]) == 6  # Fig. 4.1(d)


def test_aliases():
    assert get_profiled_model("gpt2").name == "gpt2-medium"  # Cassini's GPT2 is model parallel
    assert get_profiled_model("WideResNet101").name == "wide-resnet101"
    assert get_profiled_model("wide_resnet101_2").name == "wide-resnet101"
    assert get_profiled_model(" BERT ").name == "bert"
    assert [s.key for s in parse_job_specs("VGG16:1400, wrn:800")] == [
        "vgg16:1400",
        "wide-resnet101:800",
    ]


# ----------------------------------------------------------------------------- fluid model


def test_fluid_model_alone_and_aligned_fair_sharing():
    dlrm = tb.testbed_profile("dlrm")
    assert shared_link_iteration_times([dlrm]) == pytest.approx((1.0,))
    # two aligned DLRMs: 350 ms of Up at 0.9 each, 0.5 each when shared -> 630 ms of Up
    assert shared_link_iteration_times([dlrm, dlrm]) == pytest.approx((1.28, 1.28))
    # started half an iteration apart they never meet (HotNets: the pair is compatible)
    assert shared_link_iteration_times([dlrm, dlrm], shifts=[0.0, 0.5]) == pytest.approx((1.0, 1.0))
    # unfair sharing slides them apart (HotNets Fig. 2) and both run at their isolated speed
    assert shared_link_iteration_times([dlrm, dlrm], weights=[2, 1]) == pytest.approx((1.0, 1.0))


def test_fluid_model_max_min_with_caps():
    low = CommProfile.data_parallel(0.1, 0.1, 0.3)  # always on at 0.3
    high = CommProfile.data_parallel(0.1, 0.1, 1.0)  # always on at full rate
    t_low, t_high = shared_link_iteration_times([low, high], iterations=5, warmup=1)
    assert t_low == pytest.approx(0.1)  # below its fair share: keeps its rate
    assert t_high == pytest.approx(0.1 / 0.7)  # gets the rest
    with pytest.raises(ConfigError):
        shared_link_iteration_times([low], weights=[0.0])
    with pytest.raises(ConfigError):
        shared_link_iteration_times([high], capacity=0.5)


def test_hotnets_fair_times_are_slower_than_isolated_and_compatible_groups_gain_from_unfairness():
    for jobs, compatible in TABLE_1:
        profiles = [tb.testbed_profile(s.model, s.batch) for s in parse_job_specs(jobs)]
        fair = shared_link_iteration_times(profiles)
        unfair = shared_link_iteration_times(
            profiles, weights=[2.0 ** (len(profiles) - 1 - i) for i in range(len(profiles))]
        )
        for p, f in zip(profiles, fair, strict=True):
            assert f >= p.iteration_time * (1 - 1e-9)
        gains = [f / u for f, u in zip(fair, unfair, strict=True)]
        assert (min(gains) >= 0.99) == compatible, (jobs, gains)


# ----------------------------------------------------------------------------- report


def test_reproduction_script_writes_the_report(tmp_path):
    out = tmp_path / "compat.md"
    r = subprocess.run(
        [sys.executable, str(SCRIPT), "--out", str(out)], check=True, capture_output=True, text=True
    )
    text = out.read_text()
    assert text in r.stdout
    assert "All five groups classified as in the paper: **yes**" in text
    assert "All five scores within 0.1 of the paper: **yes**" in text
    assert "fully compatible after a rotation: **yes**" in text
    assert "after rotating the 40 ms job by 30 degrees" in text
    assert not math.isnan(float(text.split("Slowest median: ")[1].split(" ms")[0]))

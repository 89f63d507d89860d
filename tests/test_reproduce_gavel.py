"""experiments/reproductions/reproduce_gavel.py: a tiny run end to end (runs, plot, report with
the claims table), the report rebuilt from its CSV alone, and the gain it reports
computed by hand."""

from __future__ import annotations

import pandas as pd
import pytest
from conftest import experiment_script


def test_a_tiny_run_writes_the_report_and_report_only_rebuilds_it(tmp_path, monkeypatch):
    mod = experiment_script("reproduce_gavel")
    full = mod.scenario

    def short(trace, rate, jobs):  # jobs of 3-10 minutes: a run of seconds
        sc = full(trace, rate, jobs)
        wl = sc.workload.model_copy(update={"log10_duration_min": ((0.5, 1.0, 1.0),)})
        return sc.model_copy(update={"workload": wl})

    monkeypatch.setattr(mod, "scenario", short)
    claims = experiment_script("claims")
    argv = ["--traces", "single", "--rates", "30", "--seeds", "1", "--jobs", "40",
            "--window", "10", "30", "--policies", "gavel-las", "gavel-las-agnostic",
            "--workers", "1", "--out", str(tmp_path)]  # fmt: skip
    mod.main(argv)
    df = pd.read_csv(tmp_path / "runs.csv")
    assert sorted(df["policy"]) == ["gavel-las", "gavel-las-agnostic"]
    assert (df["jobs_completed"] == 40).all()
    assert (tmp_path / "jct_vs_rate.png").stat().st_size > 0
    text = (tmp_path / "report.md").read_text()
    rows = claims.parse_table(text, mod.CLAIMS_HEADING)
    assert len(rows) == 2  # the abstract's claim and Figure 8's
    jct = df.set_index("policy")["window_avg_jct_h"]
    gain = (jct["gavel-las-agnostic"] / jct["gavel-las"] - 1.0) * 100.0
    assert rows[0]["ours"] == rows[1]["ours"] == f"{gain:+.1f} %; 1 seed"  # one case
    assert "--traces single --rates 30 --seeds 1" in text
    mod.main(["--report-only", "--out", str(tmp_path)])
    assert (tmp_path / "report.md").read_text() == text


def test_the_window_must_lie_inside_the_jobs():
    mod = experiment_script("reproduce_gavel")
    with pytest.raises(SystemExit):
        mod.parse_args(["--jobs", "10", "--window", "5", "20"])


def test_running_one_trace_keeps_the_other_traces_rows(tmp_path, monkeypatch):
    mod = experiment_script("reproduce_gavel")
    calls = []

    def fake_run(trace, policy, rate, seed, jobs, window):
        calls.append((trace, policy, rate, seed))
        return {
            "trace": trace,
            "policy": policy,
            "rate_per_hour": rate,
            "seed": seed,
            "window_first": window[0],
            "window_end": window[1],
            "window_avg_jct_h": 2.0 if policy.endswith("agnostic") else 1.0,
            "avg_jct_h": 1.0,
            "makespan_h": 1.0,
            "jobs_completed": jobs,
            "wall_s": 0.0,
        }

    monkeypatch.setattr(mod, "run", fake_run)
    base = ["--seeds", "1", "--workers", "1", "--out", str(tmp_path)]
    mod.main(["--traces", "single", "--rates", "1", *base])
    mod.main(["--traces", "multiple", *base])
    df = pd.read_csv(tmp_path / "runs.csv")
    assert sorted(set(df["trace"])) == ["multiple", "single"]
    assert len(calls) == 2 + 2 * len(mod.TRACES["multiple"].rates)
    text = (tmp_path / "report.md").read_text()
    assert (
        "`python experiments/reproductions/reproduce_gavel.py --traces single --rates 1 --seeds 1`"
        in text
    )
    rows = experiment_script("claims").parse_table(text, mod.CLAIMS_HEADING)
    assert [r["ours"].startswith("single LAS 1/h: +100") for r in rows] == [True, False, False]

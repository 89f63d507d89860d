"""experiments/reproductions/claims.py: the claims table every reproduction report ends in,
its verdict rule on hand-made numbers, and the committed reports' tables (five columns, all filled,
the verdict and reason the rule gives, and what the scripts compute from the committed CSVs)."""

from __future__ import annotations

import math
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

ROOT = Path(__file__).resolve().parents[1]
EXPERIMENTS = ROOT / "experiments"
RESULTS = EXPERIMENTS / "results"
sys.path.insert(0, str(EXPERIMENTS / "reproductions"))
try:
    import claims as C
finally:
    sys.path.remove(str(EXPERIMENTS / "reproductions"))

# report -> (heading of its claims section, the CSVs its --report-only reads)
REPORTS = {
    "dally": ("Section 5 claims: paper vs ours", ("runs.csv", "timers.csv")),
    "cassini": (
        "Paper vs ours (Th+Cassini over Themis, iteration time, mean over seeds)",
        ("runs.csv",),
    ),
    "crius": ("Claims (8.3, 8.4): paper vs ours", ("runs.csv", "cells.csv")),
    "nearchus": ("Claims against Optimus", ("single.csv", "multi.csv", "rup.csv")),
    "gavel": ("Claims (section 7): paper vs ours", ("runs.csv",)),
}
VERDICTS = {C.REPRODUCED, C.PARTLY, C.NOT_REPRODUCED}


def test_table_has_the_five_columns():
    claim = C.Claim("5.2: x up to 10 % lower", C.up_to(10), {"2r": 9.0}, "`p` vs `q`", "why")
    head, rule, row = C.claims_table([claim])
    assert [c.strip() for c in head.strip("|").split("|")] == [
        "paper figure",
        "ours",
        "verdict",
        "mechanism",
        "reason",
    ]
    assert rule == "|---|---|---|---|---|"
    assert row == "| 5.2: x up to 10 % lower | +9.0 % | **reproduced** | `p` vs `q` | — |"


@pytest.mark.parametrize(
    ("figure", "values", "want"),
    [
        # up to X: the direction in every case, our best case within X -+ 25 %
        (C.up_to(69), [38, 67, 78, 85], C.REPRODUCED),
        (C.up_to(69), [38, 86.25], C.REPRODUCED),  # the widened edge is inside
        (C.up_to(69), [38, 87], C.PARTLY),  # best above 1.25 x 69
        (C.up_to(92), [25, 26, 19, 27], C.PARTLY),  # best below 0.75 x 92
        (C.up_to(69), [-5, 60], C.PARTLY),  # direction in some cases only
        (C.up_to(69), [-1, -2, 0], C.NOT_REPRODUCED),  # 0 is not better
        # a range lo-hi: one of our cases within 0.75 lo .. 1.25 hi
        (C.between(53, 83), [31, 44, 34, 72], C.REPRODUCED),
        (C.between(58, 71), [40, 10], C.PARTLY),  # 40 < 0.75 x 58 = 43.5
        (C.between(58, 71), [43.5, 10], C.REPRODUCED),
        (C.between(58, 71), [-2, -6, -13], C.NOT_REPRODUCED),
        (C.between(18, 31), [100], C.PARTLY),  # right direction, far too large
        # one figure X
        (C.about(35.6), [30.0], C.REPRODUCED),
        (C.about(35.6), [20.0], C.PARTLY),
        (C.about(35.6), [-5.0], C.NOT_REPRODUCED),
        # a plain value without a direction: within X -+ 25 % or not
        (C.value(2.29), [2.09], C.REPRODUCED),
        (C.value(2.29), [3.0], C.NOT_REPRODUCED),
        (C.value(2.29), [1.0], C.NOT_REPRODUCED),
        # no number: the direction only
        (C.better(), [1, 2], C.REPRODUCED),
        (C.better(), [1, -0.1], C.PARTLY),
        (C.better(), [-1], C.NOT_REPRODUCED),
        # similar: within -+10 % in a case
        (C.similar(), [5, -9, 10], C.REPRODUCED),
        (C.similar(), [5, -35], C.PARTLY),
        (C.similar(), [-35, 12], C.NOT_REPRODUCED),
        # undefined cases are left out; none defined: not run
        (C.up_to(69), [math.nan, 60], C.REPRODUCED),
        (C.up_to(69), [math.nan], C.NOT_RUN),
        (C.about(35.6), [], C.NOT_RUN),
    ],
)
def test_verdict_follows_the_stated_rule(figure, values, want):
    assert C.verdict(figure, values) == want
    assert C.verdict(figure, {f"case {i}": v for i, v in enumerate(values)}) == want


def test_reason_column():
    rows = C.claims_table(
        [
            C.Claim("a", C.up_to(10), {"x": 9.0}, "m", "a cause"),  # reproduced: no reason
            C.Claim("b", C.up_to(10), {"x": 1.0}, "m", "a cause"),  # partly: its cause
            C.Claim("c", C.up_to(10), {"x": -1.0}, "m"),  # not reproduced, no cause known
            C.Claim("d", C.better(), {}, "m"),  # not run
        ]
    )[2:]
    reasons = [r.strip("|").split("|")[-1].strip() for r in rows]
    assert reasons == ["—", "a cause", "cause not found", "—"]
    assert "**not run**" in rows[3]


def test_rule_text_states_the_rule():
    text = C.rule_text()
    for word in ("**reproduced**", "**partly**", "**not reproduced**", "25 %", "10 %"):
        assert word in text
    section = C.claims_section("T", "intro", [])
    assert section[:4] == ["## T", "", "intro", ""] and text in section


def test_default_ours_rendering():
    assert C.fmt_values({"a": 12.34}) == "+12.3 %"
    assert C.fmt_values({"2r": 38.2, "4r": -0.4, "8r": math.nan}) == "2r: +38, 4r: -0, 8r: n/a (%)"
    assert C.fmt_values({}) == "-"


def test_intervals_over_seeds_decide_the_direction():
    """A positive mean whose interval reaches 0 does not hold; a 'similar' claim needs its
    whole interval in the band."""
    up = C.up_to(30)
    assert C.verdict(up, {"x": 25.0}, {"x": (10.0, 40.0)}, 20) == C.REPRODUCED
    assert C.verdict(up, {"x": 25.0}, {"x": (-5.0, 40.0)}, 20) == C.NOT_REPRODUCED
    two = {"x": 25.0, "y": 20.0}
    assert C.verdict(up, two, {"x": (10.0, 40.0), "y": (-1.0, 30.0)}, 20) == C.PARTLY
    near = C.similar()
    assert C.verdict(near, {"x": 2.0}, {"x": (-4.0, 8.0)}, 20) == C.REPRODUCED
    assert C.verdict(near, {"x": 2.0}, {"x": (-4.0, 12.0)}, 20) == C.NOT_REPRODUCED


def test_fewer_than_twenty_seeds_is_at_most_partly():
    claim = C.Claim("a", C.up_to(30), {"x": 25.0}, "m", ci={"x": (10.0, 40.0)}, seeds=5)
    assert C.verdict(claim.figure, claim.values, claim.ci, claim.seeds) == C.PARTLY
    assert C.too_few_seeds(claim)
    row = C.claims_table([claim])[2]
    assert "**partly**" in row and "5 seeds, fewer than the 20" in row
    assert "+25.0 [+10.0, +40.0] %; 5 seeds" in row
    # a deterministic configuration (no seeds) keeps the plain rule
    assert C.verdict(C.up_to(30), {"x": 25.0}) == C.REPRODUCED


def test_paired_ci_is_a_fixed_bootstrap_over_seeds():
    rng = np.random.default_rng(3)
    base = rng.uniform(90, 110, 20)
    ours = base * 0.7 + rng.normal(0, 3, 20)
    lo, hi = C.paired_ci(C.reduction_pct, ours, base)
    point = C.reduction_pct(ours, base)
    assert lo < point < hi and lo > 20 and hi < 40
    assert C.paired_ci(C.reduction_pct, ours, base) == (lo, hi)  # the same runs, the same interval
    assert all(math.isnan(v) for v in C.paired_ci(C.reduction_pct, ours[:1], base[:1]))


@pytest.mark.parametrize("name", sorted(REPORTS))
def test_committed_report_claims_table_is_filled(name):
    heading, _ = REPORTS[name]
    text = (RESULTS / name / "report.md").read_text()
    assert C.rule_text() in text
    rows = C.parse_table(text, heading)
    assert rows
    for row in rows:
        assert list(row) == list(C.COLUMNS)
        assert all(cell and cell != "-" for cell in row.values()), row
        verdict = row["verdict"].strip("*")
        assert verdict in VERDICTS, row
        assert (row["reason"] == C.NO_REASON) == (verdict == C.REPRODUCED), row


@pytest.mark.parametrize("name", sorted(REPORTS))
def test_committed_claims_are_what_the_script_computes(name, tmp_path):
    """--report-only on copies of the committed CSVs gives the committed claims section."""
    heading, csvs = REPORTS[name]
    for csv in csvs:
        shutil.copy(RESULTS / name / csv, tmp_path / csv)
    script = EXPERIMENTS / "reproductions" / f"reproduce_{name}.py"
    subprocess.run(
        [sys.executable, str(script), "--report-only", "--out", str(tmp_path)],
        check=True,
        capture_output=True,
        cwd=ROOT,
    )

    def section(text: str) -> list[str]:
        lines = text.splitlines()
        start = lines.index(f"## {heading}")
        end = next((i for i in range(start + 1, len(lines)) if lines[i].startswith("## ")), None)
        return lines[start:end]

    want = section((RESULTS / name / "report.md").read_text())
    assert section((tmp_path / "report.md").read_text()) == want

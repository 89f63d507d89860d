"""The committed fragments that docs/gaps.md includes are what their script computes now.

``experiments/reproductions/gap_causes.py`` writes every measured number of docs/gaps.md into
``experiments/results/gaps/``. Two cheap sections are run again and compared with their
committed fragments: the numbers read from the reproduction reports' CSVs, Optimus's fitted
model on one single job (two short simulations), and, where the trace root is present, Dally
against Tiresias on ITP cluster01 (a few seconds). A change that moves one of those numbers fails
here until the script is re-run and its fragments committed.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from conftest import experiment_script, needs_traces

ROOT = Path(__file__).resolve().parents[1]


@pytest.mark.parametrize(
    "section",
    [
        "report_numbers",
        "nearchus_fitted_model",
        "nearchus_seeds",
        pytest.param("dally_itp", marks=needs_traces),
    ],
)
def test_gap_fragments_match_theexperiment_script(section: str) -> None:
    mod = experiment_script("gap_causes")
    fragments = mod.SECTIONS[section]()
    assert fragments
    for name, text in fragments.items():
        path = mod.OUT / f"{name}.md"
        assert path.is_file(), (
            f"{path} is missing: run python experiments/reproductions/gap_causes.py"
        )
        assert path.read_text() == text.strip("\n"), (
            f"{path.relative_to(ROOT)} differs from what "
            "`python experiments/reproductions/gap_causes.py "
            f"--only {section}` writes now; re-run it and commit the fragments"
        )


def test_gaps_page_includes_every_fragment() -> None:
    """Every committed fragment is on the page, and the page includes no other file."""
    mod = experiment_script("gap_causes")
    page = (ROOT / "docs" / "gaps.md").read_text()
    included = {
        line.split('"')[1] for line in page.splitlines() if line.strip().startswith("--8<--")
    }
    written = {p.relative_to(ROOT).as_posix() for p in mod.OUT.glob("*.md")}
    assert included == written

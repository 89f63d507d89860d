"""experiments/reproductions/reproduce_nearchus.py: percentages against a zero or missing
baseline."""

from __future__ import annotations

import importlib.util
import math
import sys
from pathlib import Path

SCRIPT = (
    Path(__file__).resolve().parents[1] / "experiments" / "reproductions" / "reproduce_nearchus.py"
)


def load():
    spec = importlib.util.spec_from_file_location("reproduce_nearchus", SCRIPT)
    mod = importlib.util.module_from_spec(spec)
    sys.path.insert(0, str(SCRIPT.parent))  # the script imports experiments/reproductions/claims.py
    try:
        spec.loader.exec_module(mod)
    finally:
        sys.path.remove(str(SCRIPT.parent))
    return mod


def test_fmt_lower_defined_and_undefined():
    mod = load()
    assert mod.fmt_lower(1.5, 2.0, "FA-BF") == "25.0% lower than FA-BF"
    assert mod.fmt_lower(3.0, 2.0, "Optimus") == "-50.0% lower than Optimus"
    # every seed of cluster B without queueing: 0 against 0 was "nan% lower"
    assert mod.fmt_lower(0.0, 0.0, "FA-BF") == "n/a (both are zero) vs FA-BF"
    assert mod.fmt_lower(0.3, 0.0, "FA-BF") == "n/a (the baseline is zero) vs FA-BF"
    assert mod.fmt_lower(1.0, float("nan"), "FA-BF") == "n/a (no baseline value) vs FA-BF"
    assert mod.fmt_lower(float("nan"), 1.0, "FA-BF") == "n/a (no value) vs FA-BF"
    assert mod.fmt_lower(float("inf"), 1.0, "FA-BF") == "n/a (infinite value) vs FA-BF"


def test_fmt_pct_signed_and_over():
    mod = load()
    assert mod.fmt_pct(0.65, 1.0, "+.1f") == "+35.0"
    assert mod.fmt_pct(1.5, 1.0, "+.0f", "over") == "+50"
    assert mod.fmt_pct(0.0, 0.0, "+.1f") == "n/a (both are zero)"
    assert math.isnan(mod.pct_lower(0.0, 0.0)) and math.isnan(mod.pct_over(1.0, 0.0))
    assert mod.pct_lower(1.0, 4.0) == 75.0

"""The project's pytest options (``[tool.pytest.ini_options]`` in pyproject.toml)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def test_the_default_summary_says_why_a_test_was_skipped_and_which_failed(tmp_path):
    (tmp_path / "test_one.py").write_text(
        "import pytest\n\n\ndef test_skipped():\n    pytest.skip('no accelerator here')\n\n\n"
        "def test_fails():\n    assert 1 == 2\n"
    )
    out = subprocess.run(
        [sys.executable, "-m", "pytest", "-c", str(ROOT / "pyproject.toml"), "--rootdir",
         str(tmp_path), "-p", "no:cacheprovider", str(tmp_path / "test_one.py")],
        capture_output=True, text=True, cwd=tmp_path, timeout=120,
    )  # fmt: skip
    assert out.returncode == 1, out.stdout + out.stderr
    summary = out.stdout.split("short test summary info")[-1]
    assert "SKIPPED [1] test_one.py:5: no accelerator here" in summary, out.stdout
    assert "FAILED test_one.py::test_fails" in summary, out.stdout

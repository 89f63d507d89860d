"""The default run keeps the written test order although pytest-randomly (in the dev extra) is
installed; `-p randomly` shuffles it, the same way for the same seed (docs/testing.md)."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
N = 12


def _order(tmp_path: Path, *args: str) -> list[int]:
    """The order in which the tests of a generated file ran under the project's options."""
    out = subprocess.run(
        [sys.executable, "-m", "pytest", "-c", str(ROOT / "pyproject.toml"), "--rootdir",
         str(tmp_path), "-p", "no:cacheprovider", "-v", *args, str(tmp_path / "test_many.py")],
        capture_output=True, text=True, cwd=tmp_path, timeout=120,
    )  # fmt: skip
    assert out.returncode == 0, out.stdout + out.stderr
    return [int(n) for n in re.findall(r"::test_(\d+) PASSED", out.stdout)]


def test_pytest_randomly_is_off_by_default_and_shuffles_when_asked(tmp_path):
    pytest.importorskip("pytest_randomly", reason="pytest-randomly (the dev extra) not installed")
    (tmp_path / "test_many.py").write_text(
        "".join(f"def test_{i:02d}():\n    pass\n\n\n" for i in range(N))
    )
    assert _order(tmp_path) == list(range(N))
    shuffled = _order(tmp_path, "-p", "randomly", "--randomly-seed=12345")
    assert sorted(shuffled) == list(range(N)) and shuffled != list(range(N))
    assert _order(tmp_path, "-p", "randomly", "--randomly-seed=12345") == shuffled


def test_the_random_order_command_is_documented():
    text = (ROOT / "docs" / "testing.md").read_text()
    assert "python -m pytest -p randomly -p no:cacheprovider --randomly-seed=12345\n" in text
    pyproject = (ROOT / "pyproject.toml").read_text()
    assert '"pytest-randomly>=3.15"' in pyproject and "-p no:randomly" in pyproject

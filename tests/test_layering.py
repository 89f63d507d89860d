"""Dependency rules of DESIGN.md: the simulator core imports no gymnasium/torch/baselines."""

from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
CORE = ["sim", "perf", "scenario", "cluster", "workload"]
FORBIDDEN = ("gymnasium", "gym", "torch", "stable_baselines3", "sb3_contrib", "baselines", "agents")


@pytest.mark.parametrize("pkg", CORE)
def test_core_packages_import_nothing_forbidden(pkg):
    for path in (ROOT / "dlcluster_gym" / pkg).rglob("*.py"):
        tree = ast.parse(path.read_text())
        for node in ast.walk(tree):
            if isinstance(node, ast.Import):
                names = [a.name for a in node.names]
            elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
                names = [node.module]
            else:
                continue
            for name in names:
                parts = name.split(".")
                top = parts[1] if parts[0] == "dlcluster_gym" and len(parts) > 1 else parts[0]
                assert top not in FORBIDDEN, f"{path}: imports {name}"


def test_running_a_simulation_does_not_import_torch_or_baselines_eagerly():
    code = (
        "import sys, dlcluster_gym;"
        "assert 'torch' not in sys.modules;"
        "assert 'dlcluster_gym.baselines' not in sys.modules, 'baselines imported eagerly';"
        "dlcluster_gym.simulate('dally-batch-2rack', 'fcfs');"
        "assert 'torch' not in sys.modules"
    )
    subprocess.run([sys.executable, "-c", code], check=True, cwd=ROOT)

"""The package's layers: no module imports a module of a higher layer.

The order, lowest first (docs/concepts.md, "Code layout", shows it):

    errors, numerics, files, version leaf helpers
    workload, cluster.catalog        jobs, models, traces, hardware data: what a workload *is*
    config                           typed, validated configs of clusters, workloads, scenarios
    cluster                          topology and allocation state
    perf                             how fast a job runs where it is placed
    scenario                         builds a scenario: jobs sized for its cluster and network
    sim                              the engine, view, actions, estimators, results
    everything else                  scheduler registry, api, envs, leaderboard, cli, ...

Imports inside functions count (they are still dependencies of the design); imports under
``if TYPE_CHECKING:`` count too. A module may import modules of its own layer or lower ones.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
PACKAGE = ROOT / "dlcluster_gym"

# Longest matching prefix decides a module's layer; anything unlisted is the top layer.
LAYERS: dict[str, int] = {
    "dlcluster_gym.errors": 0,
    "dlcluster_gym.numerics": 0,
    "dlcluster_gym.files": 0,
    "dlcluster_gym.version": 0,
    "dlcluster_gym.workload": 1,
    "dlcluster_gym.cluster.catalog": 1,
    "dlcluster_gym.config": 2,
    "dlcluster_gym.cluster": 3,
    "dlcluster_gym.perf": 4,
    "dlcluster_gym.scenario": 5,
    "dlcluster_gym.sim": 6,
}
TOP = 7
NAMES = {0: "leaf", 1: "workload data", 2: "config", 3: "cluster", 4: "perf", 5: "scenario",
         6: "sim", TOP: "top"}  # fmt: skip


def layer(module: str) -> int:
    best, rank = "", TOP
    for prefix, value in LAYERS.items():
        if (module == prefix or module.startswith(prefix + ".")) and len(prefix) > len(best):
            best, rank = prefix, value
    return rank


def module_name(path: Path) -> str:
    parts = list(path.relative_to(ROOT).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts = parts[:-1]
    return ".".join(parts)


MODULES = {module_name(p): p for p in sorted(PACKAGE.rglob("*.py"))}


def imported(module: str, path: Path) -> set[str]:
    """The package's own modules that ``module`` imports (``from pkg import mod`` -> pkg.mod)."""
    pkg = module if path.name == "__init__.py" else module.rpartition(".")[0]
    out: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            targets = [a.name for a in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                up = pkg.split(".")
                up = up[: len(up) - (node.level - 1)] if node.level > 1 else up
                base = ".".join([*up, base]) if base else ".".join(up)
            targets = [f"{base}.{a.name}" if f"{base}.{a.name}" in MODULES else base
                       for a in node.names]  # fmt: skip
        else:
            continue
        for target in targets:
            while target and target not in MODULES:
                target = target.rpartition(".")[0]
            if target.startswith("dlcluster_gym") and target != module:
                out.add(target)
    return out


def test_layer_table_names_real_modules() -> None:
    for prefix in LAYERS:
        assert any(m == prefix or m.startswith(prefix + ".") for m in MODULES), prefix


@pytest.mark.parametrize("module", [m for m in MODULES if layer(m) < TOP])
def test_no_import_of_a_higher_layer(module: str) -> None:
    rank = layer(module)
    upward = sorted(
        f"{target} ({NAMES[layer(target)]})"
        for target in imported(module, MODULES[module])
        if layer(target) > rank
    )
    assert not upward, f"{module} ({NAMES[rank]}) imports a higher layer: {', '.join(upward)}"


def test_the_walk_sees_upward_imports() -> None:
    """The walk itself: the engine imports perf (allowed), and a fake upward edge is caught."""
    assert "dlcluster_gym.perf.network" in imported(
        "dlcluster_gym.sim.engine", MODULES["dlcluster_gym.sim.engine"]
    ) or any(t.startswith("dlcluster_gym.perf") for t in imported(
        "dlcluster_gym.sim.engine", MODULES["dlcluster_gym.sim.engine"]))  # fmt: skip
    assert layer("dlcluster_gym.envs.base") > layer("dlcluster_gym.workload.job")
    assert layer("dlcluster_gym.cluster.catalog") < layer("dlcluster_gym.config")
    assert layer("dlcluster_gym.cluster.topology") > layer("dlcluster_gym.config")

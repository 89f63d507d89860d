"""The paper schedulers and the agents import as ``dlcluster_gym.baselines`` /
``dlcluster_gym.agents``: nothing installs or imports top-level ``baselines`` or ``agents``
(names other projects use too), in a source checkout and in the wheel alike."""

from __future__ import annotations

import ast
import shutil
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

import dlcluster_gym
from dlcluster_gym.envs.policies import ENV_POLICIES
from dlcluster_gym.scheduler import policies

ROOT = Path(__file__).resolve().parents[1]
OWN = ("baselines", "agents")


def _imports(path: Path) -> list[str]:
    names: list[str] = []
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            names += [a.name for a in node.names]
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            names.append(node.module)
    return names


def test_no_file_imports_the_top_level_names():
    files = [
        p
        for d in ("dlcluster_gym", *OWN, "experiments", "tests", "examples")
        if (ROOT / d).is_dir()
        for p in (ROOT / d).rglob("*.py")
    ]
    assert len(files) > 100
    bad = [
        f"{p.relative_to(ROOT)}: {name}"
        for p in files
        for name in _imports(p)
        if name.split(".")[0] in OWN
    ]
    assert not bad, "import these through dlcluster_gym.baselines / .agents:\n" + "\n".join(bad)


def test_checkout_resolves_the_namespace_to_the_repository_folders():
    import dlcluster_gym.agents as agents
    import dlcluster_gym.baselines.dally as dally

    assert Path(dally.__file__) == ROOT / "baselines" / "dally.py"
    assert Path(agents.__file__) == ROOT / "agents" / "__init__.py"
    assert "baselines" not in sys.modules and "agents" not in sys.modules


def test_every_registered_target_is_namespaced():
    targets = [spec.target for spec in policies().values() if isinstance(spec.target, str)]
    targets += [t for kinds in ENV_POLICIES.values() for t, _ in kinds.values()]
    assert len(targets) > 20
    for target in targets:
        module = target.partition(":")[0]
        assert module.split(".")[0] not in OWN, target


def test_wheel_config_installs_both_folders_inside_the_package():
    tomllib = pytest.importorskip("tomllib", reason="tomllib needs Python 3.11")
    wheel = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["hatch"]["build"][
        "targets"
    ]["wheel"]
    assert wheel["packages"] == ["dlcluster_gym"]
    assert wheel["force-include"]["baselines"] == "dlcluster_gym/baselines"
    assert wheel["force-include"]["agents"] == "dlcluster_gym/agents"


@pytest.mark.slow
def test_built_wheel_has_no_top_level_baselines_or_agents(tmp_path):
    if shutil.which("pip") is None:
        pytest.skip("pip not found")
    subprocess.run(
        [sys.executable, "-m", "pip", "wheel", str(ROOT), "--no-deps", "-q", "-w", str(tmp_path)],
        check=True,
    )
    (whl,) = tmp_path.glob("dlcluster_gym-*.whl")
    tops = {n.split("/")[0] for n in zipfile.ZipFile(whl).namelist()}
    assert tops == {"dlcluster_gym", f"dlcluster_gym-{dlcluster_gym.__version__}.dist-info"}
    names = set(zipfile.ZipFile(whl).namelist())
    assert "dlcluster_gym/baselines/dally.py" in names
    assert "dlcluster_gym/agents/checkpoints/placement.zip" in names

"""The documentation site: it builds in strict mode (a broken link or reference fails), and
the API reference covers every public name."""

from __future__ import annotations

import importlib
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
# (module, the name the API pages document it under: the agents ship in the package's
# namespace as dlcluster_gym.agents, from the top-level agents/ folder the docs build reads)
PUBLIC = (
    ("dlcluster_gym", "dlcluster_gym"),
    ("dlcluster_gym.envs", "dlcluster_gym.envs"),
    ("dlcluster_gym.leaderboard", "dlcluster_gym.leaderboard"),
    ("dlcluster_gym.agents", "agents"),
)


def _build(config: Path, site: Path) -> subprocess.CompletedProcess:
    cmd = [sys.executable, "-m", "mkdocs", "build", "--strict", "-f", str(config), "-d", str(site)]
    return subprocess.run(cmd, capture_output=True, text=True, timeout=600, cwd=config.parent)


def test_site_builds_in_strict_mode(tmp_path: Path) -> None:
    pytest.importorskip("mkdocs", reason="the dev extra installs MkDocs")
    run = _build(ROOT / "mkdocs.yml", tmp_path / "site")
    assert run.returncode == 0, run.stderr[-4000:]
    assert (tmp_path / "site" / "api" / "simulation" / "index.html").is_file()
    assert (
        tmp_path / "site" / "experiments" / "results" / "dally" / "report" / "index.html"
    ).is_file()


def test_strict_build_fails_on_a_broken_link(tmp_path: Path) -> None:
    """The check above can fail: a page linking to a missing page breaks the build."""
    pytest.importorskip("mkdocs", reason="the dev extra installs MkDocs")
    copy = tmp_path / "repo"
    shutil.copytree(ROOT / "docs", copy / "docs")
    shutil.copy(ROOT / "mkdocs.yml", copy / "mkdocs.yml")
    (copy / "experiments" / "results").mkdir(parents=True)
    for page in (copy / "docs").rglob("*.md"):  # the generated pages the docs include
        for rel in re.findall(r'^--8<-- "([^"]+)"', page.read_text(), re.MULTILINE):
            (copy / rel).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy(ROOT / rel, copy / rel)
    (copy / "docs" / "broken.md").write_text("# Broken\n\n[nowhere](no-such-page.md)\n")
    run = _build(copy / "mkdocs.yml", tmp_path / "site")
    assert run.returncode != 0
    assert "no-such-page.md" in run.stderr


def _documented() -> set[str]:
    names: set[str] = set()
    for page in (ROOT / "docs" / "api").glob("*.md"):
        text = page.read_text()
        for target in re.findall(r"^::: ([\w.]+)", text, re.MULTILINE):
            names.add(target)
        for block in re.findall(
            r"^::: ([\w.]+)\n(?:\s+.*\n)*?\s+members: \[([^\]]*)\]", text, re.M
        ):
            module, members = block
            names.update(f"{module}.{m.strip()}" for m in members.split(","))
    return names


@pytest.mark.parametrize(("module", "documented_as"), PUBLIC)
def test_api_reference_covers_every_public_name(module: str, documented_as: str) -> None:
    mod = importlib.import_module(module)
    documented = _documented()
    missing = [
        name
        for name in mod.__all__
        if not name.startswith("__") and f"{documented_as}.{name}" not in documented
    ]
    assert not missing, f"{module}: not in docs/api/*.md: {missing}"

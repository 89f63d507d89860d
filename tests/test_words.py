"""User-facing text holds no development history: no sessions, no issue numbers, no "this
pass"; docstrings cite paper sections. History goes in CHANGELOG.md and git."""

from __future__ import annotations

import re
from pathlib import Path

from click.testing import CliRunner

ROOT = Path(__file__).resolve().parents[1]
HISTORY = re.compile(
    r"\bsessions?\b|\bissues? ?#?\d+|\(#\d+\)|"
    r"\b(this|first|second|third|fourth|fifth) pass\b|\bbefore issue\b",
    re.IGNORECASE,
)
USER_FACING = (
    "README.md",
    "docs/**/*.md",
    "configs/**/*.yaml",
    "dlcluster_gym/**/*.py",
    "baselines/**/*.py",
    "agents/**/*.py",
    "examples/**/*.py",
    "experiments/results/*/*.md",
)


def _user_facing_files() -> list[Path]:
    files: set[Path] = set()
    for pattern in USER_FACING:
        files.update(p for p in ROOT.glob(pattern) if p.is_file())
    return sorted(p for p in files if "hooks" not in p.parts)


def test_user_facing_text_holds_no_development_history() -> None:
    hits = []
    for path in _user_facing_files():
        for n, line in enumerate(path.read_text(errors="replace").splitlines(), 1):
            if HISTORY.search(line):
                hits.append(f"{path.relative_to(ROOT)}:{n}: {line.strip()[:100]}")
    assert not hits, f"{len(hits)} lines with development history:\n" + "\n".join(hits[:60])


def test_cli_help_holds_no_development_history() -> None:
    from dlcluster_gym.cli import main

    runner = CliRunner()
    texts = [runner.invoke(main, ["--help"]).output]
    for name in main.commands:
        texts.append(runner.invoke(main, [name, "--help"]).output)
    hits = [line for text in texts for line in text.splitlines() if HISTORY.search(line)]
    assert not hits, hits
    assert all(len(t) > 50 for t in texts)

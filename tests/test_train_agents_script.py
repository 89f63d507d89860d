"""experiments/agents/train_agents.py: the step names, and the held-out page's header."""

from __future__ import annotations

import subprocess
import sys
import types
from pathlib import Path

import pytest
from conftest import experiment_script

SCRIPT = Path(__file__).resolve().parents[1] / "experiments" / "agents" / "train_agents.py"


@pytest.mark.parametrize(("arg", "rc"), [("--help", 0), ("bogus", 1)])
def test_unknown_steps_print_the_usage_and_run_nothing(arg: str, rc: int) -> None:
    out = subprocess.run([sys.executable, str(SCRIPT), arg], capture_output=True, text=True)
    assert out.returncode == rc
    assert "Steps (each can be run alone)" in out.stdout
    assert (arg == "--help") or "unknown step(s): bogus" in out.stderr


def test_heldout_runs_evaluate_on_every_agent_and_heads_the_page(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    mod = experiment_script("train_agents")
    calls = []

    def fake_run(cmd, **kw):
        calls.append(cmd)
        (tmp_path / "heldout").mkdir()
        (tmp_path / "heldout" / "eval.md").write_text("# Agent evaluation\n\n- agent rows\n")

    monkeypatch.setattr(mod, "RESULTS", tmp_path)
    monkeypatch.setattr(mod, "ROOT", tmp_path.parent)
    monkeypatch.setattr(mod, "CHECKPOINTS", tmp_path.parent / "ckpt")
    monkeypatch.setattr(mod, "subprocess", types.SimpleNamespace(run=fake_run))
    mod.heldout()
    (cmd,) = calls
    assert cmd[:2] == ["dlcluster", "evaluate"]
    assert [c.split("=")[1] for c in cmd if c.startswith("--agent=")] == list(mod.AGENTS)
    assert cmd[cmd.index("--seeds") + 1] == "101-110"
    page = (tmp_path / "heldout" / "eval.md").read_text().splitlines()
    assert page[0] == "# Agent evaluation"
    assert page[2].startswith("Written by `python experiments/agents/train_agents.py heldout`")
    assert "--seeds 101-110" in page[2] and "s wall" in page[2]
    assert page[-1] == "- agent rows"

"""The rollout labelling's worker pool (``agents.rollouts.rollout_data`` with ``workers`` > 1)
ends with its driver: SIGKILL to the driver alone leaves no worker running on."""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from fixtures.processes import HAS_PROC, alive, descendants

REPO = Path(__file__).resolve().parents[1]

# A driver that labels two episodes in two workers; each episode (tests/fixtures/rollout_tasks)
# marks that it started, then sleeps for a minute.
DRIVER = """
import json, sys, types
from dlcluster_gym.agents import rollouts
from tests.fixtures.rollout_tasks import slow_episode

rollouts.label_episode = slow_episode
data = json.loads(sys.argv[1])
cfg = types.SimpleNamespace(
    agent="placement", env_kwargs={}, warm_start=types.SimpleNamespace(teacher="dally"),
    model_dump=lambda mode: data,
)
rollouts.rollout_data(cfg, episodes=2, seed=0, horizon_h=1.0, margin=0.0, workers=2)
"""


@pytest.mark.skipif(not HAS_PROC, reason="needs Linux /proc")
def test_rollout_workers_die_with_a_killed_driver(tmp_path):
    markers = tmp_path / "started"
    markers.mkdir()
    data = json.dumps({"marker_dir": str(markers), "seconds": 60})
    proc = subprocess.Popen([sys.executable, "-c", DRIVER, data], cwd=REPO, start_new_session=True)
    try:
        deadline = time.monotonic() + 60
        while len(list(markers.iterdir())) < 2 and time.monotonic() < deadline:
            assert proc.poll() is None, f"the driver exited with {proc.returncode}"
            time.sleep(0.1)
        started = {int(p.name.split(".")[0]) for p in markers.iterdir()}
        assert len(started) == 2, f"{len(started)} of 2 episodes started in 60 s"
        kids = {k for k in descendants(proc.pid) if alive(k)}
        assert started <= kids, (started, kids)
        proc.kill()  # the driver alone, not its process group
        proc.wait()
        t = time.monotonic()
        while any(alive(k) for k in kids) and time.monotonic() - t < 10:
            time.sleep(0.1)
        left = [k for k in kids if alive(k)]
        assert not left, f"processes {left} outlived the killed driver"
    finally:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(proc.pid, signal.SIGKILL)

"""The leaderboard on a multi-node Ray cluster (issue #19): a head and two worker nodes on
this machine (``ray.cluster_utils.Cluster``, what ``ray start --head`` + ``ray start
--address`` give across machines). The same results as the local backend, a worker killed
mid-cell is retried and the run completes, and ``--resume`` finishes a run whose driver died.

Slow (a Ray cluster takes seconds to start): ``python -m pytest -m slow tests/test_ray_cluster.py``.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
import yaml

from dlcluster_gym import leaderboard as lb
from dlcluster_gym.leaderboard.runner import read_rows

pytestmark = pytest.mark.slow
REPO = Path(__file__).resolve().parents[1]
DIES = "tests.fixtures.leaderboard_policies:DiesOnce"
SKIP = ("wall_s", "cpu_s", "reason")  # machine-dependent fields


def _scenario(tmp: Path, num_jobs: int) -> str:
    data = {
        "description": "tiny Ray test scenario",
        "cluster": {"racks": 1, "machines_per_rack": 2, "gpus_per_machine": 4},
        "workload": {
            "kind": "synthetic",
            "num_jobs": num_jobs,
            "models": ["resnet50", "vgg11"],
            "gpu_demands": [1, 2, 4, 8],
            "iterations": [2000, 20000],
        },
    }
    p = tmp / f"ray{num_jobs}.yaml"
    p.write_text(yaml.safe_dump(data))
    return str(p)


def _suite(tmp: Path, entrants: list, seeds: list[int], num_jobs: int = 40) -> Path:
    data = {"name": "ray", "seeds": seeds, "entrants": entrants}
    data["scenarios"] = [_scenario(tmp, num_jobs)]
    p = tmp / "suite.yaml"
    p.write_text(yaml.safe_dump(data))
    return p


def _metrics(rows: list[dict]) -> list[dict]:
    return [{k: v for k, v in r.items() if k not in SKIP} for r in rows]


@pytest.fixture(scope="module")
def cluster():
    """A head node and two worker nodes, one CPU each, on this machine."""
    ray = pytest.importorskip("ray")
    from ray.cluster_utils import Cluster

    c = Cluster(
        initialize_head=True,
        head_node_args={"num_cpus": 1, "include_dashboard": False},
    )
    for _ in range(2):
        c.add_node(num_cpus=1)
    c.wait_for_nodes()
    yield c
    if ray.is_initialized():
        ray.shutdown()
    c.shutdown()


def test_multi_node_run_matches_local(cluster, tmp_path):
    suite = lb.load_suite(_suite(tmp_path, ["fcfs", "dally", "tiresias"], [1, 2]))
    local = lb.run_suite(suite, tmp_path / "local", workers=2, progress=False)
    on_ray = lb.run_suite(
        suite, tmp_path / "ray", backend="ray", ray_address=cluster.address, progress=False
    )
    assert [r["status"] for r in on_ray] == ["ok"] * 6
    assert _metrics(on_ray) == _metrics(local)


def test_worker_killed_mid_cell_is_retried(cluster, tmp_path):
    marker = tmp_path / "died"
    entrant = {"policy": DIES, "params": {"marker": str(marker)}, "label": "dies-once"}
    suite = lb.load_suite(_suite(tmp_path, [entrant, "fcfs"], [1]))
    rows = lb.run_suite(
        suite, tmp_path / "ray", backend="ray", ray_address=cluster.address, progress=False
    )
    assert marker.exists(), "the worker was never killed"
    assert [r["status"] for r in rows] == ["ok", "ok"]
    # The retried cell is a plain FCFS run: its metrics equal the fcfs cell's.
    dies, fcfs = _metrics(rows)
    same = {k for k in fcfs if k not in ("id", "entrant", "policy", "params", "config_hash")}
    assert {k: dies[k] for k in same} == {k: fcfs[k] for k in same}


def test_resume_after_the_driver_dies(cluster, tmp_path):
    suite = _suite(tmp_path, ["fcfs", "gandiva"], [1, 2, 3], num_jobs=150)
    out = tmp_path / "killed"
    cmd = [sys.executable, "-m", "dlcluster_gym.cli", "leaderboard", "--suite", str(suite)]
    cmd += ["--out", str(out), "--backend", "ray", "--ray-address", cluster.address, "--quiet"]
    env = {
        **os.environ,
        "PYTHONPATH": os.pathsep.join([str(REPO), os.environ.get("PYTHONPATH", "")]),
    }
    proc = subprocess.Popen(cmd, cwd=REPO, env=env, start_new_session=True)
    deadline = time.monotonic() + 120
    while len(list((out / "cells").glob("*.json"))) < 1 and time.monotonic() < deadline:
        time.sleep(0.05)
    os.killpg(proc.pid, signal.SIGKILL)  # the driver dies; the cluster lives on
    proc.wait()
    done = {p.stem for p in (out / "cells").glob("*.json")}
    assert 1 <= len(done) < 6, "the run finished before its driver could be killed"
    resumed = subprocess.run(
        [*cmd, "--resume"], cwd=REPO, env=env, capture_output=True, text=True, timeout=300
    )
    assert resumed.returncode == 0, resumed.stderr
    full = lb.run_suite(lb.load_suite(suite), tmp_path / "full", workers=2, progress=False)
    assert _metrics(read_rows(out, [r["id"] for r in full])) == _metrics(full)

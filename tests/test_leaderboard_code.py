"""The ``code`` a leaderboard cell records is the hash of the sources and presets that its
worker ran, computed here the same way while the cell runs (``tests/test_leaderboard.py`` pins
one value for its resume and replay tests)."""

from __future__ import annotations

import threading

import yaml

from dlcluster_gym import leaderboard as lb
from dlcluster_gym.config import configs_dir
from dlcluster_gym.leaderboard import fingerprint


def _sources_now() -> str:
    """The hash of the sources and presets as they are now, as a worker computes it."""
    return fingerprint.tree_hash(fingerprint._source_roots(), configs_dir())


def test_a_cell_records_the_hash_of_the_sources_it_ran(tmp_path):
    scenario = {
        "description": "one small run",
        "cluster": {"racks": 1, "machines_per_rack": 1, "gpus_per_machine": 4},
        "workload": {"kind": "synthetic", "num_jobs": 4, "models": ["resnet50"]},
    }
    (tmp_path / "s.yaml").write_text(yaml.safe_dump(scenario))
    suite = {"name": "code", "seeds": [1], "entrants": ["fcfs"], "scenarios": ["s.yaml"]}
    (tmp_path / "suite.yaml").write_text(yaml.safe_dump(suite))
    # every state of the sources while the cell runs: a file edited meanwhile (by other work
    # in this checkout) adds a value, and the worker saw one of them
    seen = {_sources_now()}
    stop = threading.Event()

    def watch() -> None:
        while not stop.wait(0.05):
            seen.add(_sources_now())

    watcher = threading.Thread(target=watch, daemon=True)
    watcher.start()
    try:
        (row,) = lb.run_suite(lb.load_suite(tmp_path / "suite.yaml"), tmp_path / "run",
                              workers=1, progress=False)  # fmt: skip
    finally:
        stop.set()
        watcher.join()
    seen.add(_sources_now())
    assert row["status"] == "ok" and len(row["code"]) == 16
    assert row["code"] in seen, (row["code"], seen)

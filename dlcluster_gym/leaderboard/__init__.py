"""Leaderboards: suites of (entrant, scenario, seed) cells, run on local processes or Ray,
rendered as tables, plots, Markdown and one self-contained HTML page."""

from dlcluster_gym.leaderboard.report import render_leaderboard, report_run, save_suite
from dlcluster_gym.leaderboard.runner import resolve_entrant, run_cell, run_suite
from dlcluster_gym.leaderboard.suite import Cell, Suite, list_suites, load_suite
from dlcluster_gym.leaderboard.verify import verify

__all__ = [
    "Cell",
    "Suite",
    "list_suites",
    "load_suite",
    "render_leaderboard",
    "report_run",
    "resolve_entrant",
    "run_cell",
    "run_suite",
    "save_suite",
    "verify",
]

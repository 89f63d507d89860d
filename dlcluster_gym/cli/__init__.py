"""The ``dlcluster`` command: the group, and the commands of this package's modules.

Each command module lists its commands in ``COMMANDS`` and imports only ``cli.common`` (the
errors, output and checks they share), never this module; the group adds them here."""

from __future__ import annotations

import warnings

import click

from dlcluster_gym.cli import (
    evaluate,
    leaderboard,
    listing,
    models,
    profile,
    simulate,
    traces,
    train,
)
from dlcluster_gym.cli.common import _Group, _warn_to_stderr

__all__ = ["main"]


@click.group(cls=_Group)
@click.version_option(package_name="dlcluster-gym")
def main() -> None:
    """Simulate deep-learning cluster schedulers; list presets; inspect the model zoo."""
    warnings.showwarning = _warn_to_stderr


for _module in (simulate, profile, listing, traces, models, leaderboard, train, evaluate):
    for _command in _module.COMMANDS:
        main.add_command(_command)

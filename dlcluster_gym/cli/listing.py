"""``dlcluster list``: policies, scenarios, models, clusters, suites or splits."""

from __future__ import annotations

import os

import click

from dlcluster_gym.cli.common import ExplainedError
from dlcluster_gym.errors import DLClusterError


# `dlcluster list` alone shows its help (what can be listed), as `dlcluster` alone does; 88
# columns keep the usage line, with every kind, on one line
@click.command(name="list", no_args_is_help=True, context_settings={"terminal_width": 88})
@click.argument(
    "what",
    type=click.Choice(["policies", "scenarios", "models", "clusters", "suites", "splits"]),
)
def list_cmd(what: str) -> None:
    """List policies, scenarios, models, clusters, suites or splits, one per line with a
    description.

    Policies also show their kind with default parameters: deployable (uses what a real
    scheduler observes), clairvoyant (reads job lengths or future arrivals) or bound.
    Scenarios, clusters, suites and splits (named train/validation/test sets of scenarios
    and seeds: `dlcluster evaluate --split`, `dlcluster train --split`) are the YAML presets
    of the configs folder: $DLCLUSTER_CONFIGS when set, else the presets that ship with the
    package."""
    rows: list[tuple[str, str]]
    if what == "policies":
        from dlcluster_gym.leaderboard.suite import entrant_kind
        from dlcluster_gym.scheduler import KINDS, policies

        kind_width = max(len(k) for k in KINDS)
        rows = [
            (n, f"{entrant_kind(n):<{kind_width}}  {s.description}") for n, s in policies().items()
        ]
    elif what == "models":
        from dlcluster_gym.workload.models import MODEL_ZOO

        rows = [
            (
                n,
                f"{p.family}, {p.params_m:g}M params, {p.skew} skew, {p.parallelism} "
                f"parallel, {p.compute_s * 1e3:g} ms/iter compute",
            )
            for n, p in sorted(MODEL_ZOO.items())
        ]
    else:
        from dlcluster_gym.config import list_presets

        _check_preset_folder(what)
        rows = list(list_presets(what).items())
    width = max((len(n) for n, _ in rows), default=0)
    for name, desc in rows:
        click.echo(f"{name:<{width}}  {desc}")


def _check_preset_folder(kind: str) -> None:
    """Raise :class:`ExplainedError` when the ``kind`` preset folder is missing or holds a
    preset file that cannot be read or is not a mapping, naming every such file."""
    from dlcluster_gym.config import configs_dir, load_yaml_file

    root = configs_dir()
    folder = root / kind
    ctx = click.get_current_context(silent=True)
    cmd = f"{ctx.command_path} {kind}" if ctx is not None else f"list {kind}"
    if os.environ.get("DLCLUSTER_CONFIGS"):
        where = f"Presets are read from {root} (set by DLCLUSTER_CONFIGS)"
    else:
        where = f"Presets are read from {root} (shipped with the package)"
    if not folder.is_dir():
        fix = (
            "point DLCLUSTER_CONFIGS at a folder that holds clusters/, scenarios/ and suites/, "
            "or unset it to use the presets shipped with the package"
            if os.environ.get("DLCLUSTER_CONFIGS")
            else "the installation is damaged: reinstall the package"
        )
        raise ExplainedError(f"{cmd}: no {kind} folder at {folder}\n{where}: {fix}.")
    problems: list[str] = []
    for path in sorted(folder.glob("*.yaml")):
        try:
            data = load_yaml_file(path)
        except DLClusterError as exc:  # names the file, the line and the problem
            problems.append(str(exc))
            continue
        except OSError as exc:
            problems.append(f"{path}: {exc.strerror or exc}")
            continue
        if not isinstance(data, dict):
            held = "nothing" if data is None else f"a {type(data).__name__}"
            problems.append(f"{path}: holds {held}, not a mapping (description: ... and the rest)")
    if problems:
        many = len(problems) > 1
        head = f"{cmd}: {len(problems)} preset file{'s' if many else ''} cannot be read:"
        tail = f"{where}: fix or remove {'these files' if many else 'it'}."
        raise ExplainedError("\n".join([head, *(f"  {p}" for p in problems), tail]))


COMMANDS = (list_cmd,)

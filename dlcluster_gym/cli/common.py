"""What every ``dlcluster`` command shares: errors as one line on stderr with exit code 2,
warnings routed to stderr, number formatting, the progress bar, checks of the paths a command
writes and of seed lists."""

from __future__ import annotations

import math
import os
import sys
import tempfile
from pathlib import Path
from typing import Any, NoReturn

import click

from dlcluster_gym.config import MAX_SEED
from dlcluster_gym.errors import DLClusterError


def _one_line(msg: str) -> str:
    """A multi-line message (a validation error listing fields) as one line."""
    lines = [ln.strip() for ln in str(msg).splitlines() if ln.strip()]
    if len(lines) <= 1:
        return lines[0] if lines else ""
    return f"{lines[0]} {'; '.join(lines[1:])}"


def _fail(msg: str) -> NoReturn:
    click.echo(f"error: {_one_line(msg)}", err=True)
    sys.exit(2)


def _warn_to_stderr(
    message: Any, category: Any, filename: str, lineno: int, file: Any = None, line: Any = None
) -> None:
    click.echo(f"warning: {_one_line(str(message))}", err=True)


class ExplainedError(click.ClickException):
    """An error that takes several lines to explain: what failed first, then each thing found
    wrong and what to do, printed as they are (not joined into one line)."""


# click >= 8.2 raises this for a group called without a command (older clicks print the help
# themselves); its message is the whole help, not an error to squash into one line.
NO_ARGS_IS_HELP = getattr(click.exceptions, "NoArgsIsHelpError", ())


class _Group(click.Group):
    """Every error a user can cause is one line on stderr and exit code 2, never a traceback:
    the package's own errors, click's usage errors, and a policy's crash (named by the
    engine); an :class:`ExplainedError` (several problems found at once) keeps one line per
    problem, and ``dlcluster``, ``dlcluster list`` or ``dlcluster traces`` alone shows its
    help. SIGTERM/Ctrl-C exit 143/130 with one line. Anything else is a bug: one line and exit
    3 (``DLCLUSTER_DEBUG=1`` shows the traceback)."""

    def main(  # type: ignore[override]
        self,
        args: Any = None,
        prog_name: str | None = None,
        complete_var: str | None = None,
        standalone_mode: bool = True,
        **extra: Any,
    ) -> Any:
        if not standalone_mode:
            return super().main(args, prog_name, complete_var, standalone_mode, **extra)
        try:
            rv = super().main(args, prog_name, complete_var, False, **extra)
        except NO_ARGS_IS_HELP as exc:  # `dlcluster` alone: the help, where and as click shows it
            text = exc.ctx.get_help() if exc.ctx is not None else exc.format_message()
            click.echo(text, err=True)
            sys.exit(exc.exit_code)
        except ExplainedError as exc:
            click.echo(f"error: {exc.format_message()}", err=True)
            sys.exit(2)
        except click.UsageError as exc:
            where = f"{exc.ctx.command_path}: " if exc.ctx is not None else ""
            _fail(f"{where}{exc.format_message()} (see --help)")
        except click.ClickException as exc:
            _fail(exc.format_message())
        except (click.exceptions.Abort, KeyboardInterrupt) as exc:
            from dlcluster_gym.leaderboard.runner import Terminated

            # click turns KeyboardInterrupt (and our SIGTERM's Terminated) into Abort
            term = isinstance(exc, Terminated) or isinstance(exc.__cause__, Terminated)
            click.echo(
                f"error: {'terminated by SIGTERM' if term else 'interrupted'}; finished work "
                "is kept (a leaderboard run resumes with --resume)",
                err=True,
            )
            sys.exit(143 if term else 130)
        except DLClusterError as exc:
            _fail(str(exc))
        except OSError as exc:  # a path we could not read or write
            _fail(f"{exc.strerror or exc}: {exc.filename}" if exc.filename else str(exc))
        except Exception as exc:
            if os.environ.get("DLCLUSTER_DEBUG"):
                raise
            click.echo(
                f"error: internal error {type(exc).__name__}: {_one_line(str(exc))} (a bug; "
                "please report it; DLCLUSTER_DEBUG=1 shows the traceback)",
                err=True,
            )
            sys.exit(3)
        sys.exit(rv if isinstance(rv, int) else 0)


def _fmt(key: str, v: Any) -> str:
    if isinstance(v, float):
        if math.isnan(v):
            return "n/a"
        if key.endswith("_s"):
            return f"{v:,.1f} s ({v / 3600:,.2f} h)" if v >= 3600 else f"{v:,.3f} s"
        return f"{v:.4f}"
    return str(v)


def _progress_bar(enabled: bool, total_hint: str) -> tuple[Any, Any]:
    if not enabled:
        return None, None
    from tqdm import tqdm

    bar = tqdm(
        total=None,
        unit="job",
        desc=total_hint,
        file=sys.stderr,
        mininterval=0.5,
        dynamic_ncols=True,
    )
    state = {"done": -1}

    def update(done: int, total: int) -> None:
        if bar.total != total:
            bar.total = total
        if done != state["done"]:
            bar.update(done - max(state["done"], 0))
            state["done"] = done

    return bar, update


def check_writable(path: Path, option: str, *, directory: bool) -> None:
    """Fail before a run, not after it, when ``path`` cannot be written: the nearest existing
    ancestor must be a writable directory, and ``path`` itself not the wrong kind of thing."""
    if directory and path.exists() and not path.is_dir():
        _fail(f"{option} {path}: exists and is not a directory")
    if not directory and path.is_dir():
        _fail(f"{option} {path}: is a directory; give a file path")
    parent = path if directory and path.exists() else path.parent
    while not parent.exists() and parent != parent.parent:
        parent = parent.parent
    if not parent.is_dir():
        _fail(f"{option} {path}: {parent} is not a directory")
    if not os.access(parent, os.W_OK | os.X_OK) or (path.exists() and not os.access(path, os.W_OK)):
        _fail(f"{option} {path}: not writable (no write permission in {parent})")


def prepare_out_file(path: Path, option: str) -> None:
    """``check_writable``, then create ``path``'s folder and a scratch file in it: some places
    pass the permission check and still refuse files (``/proc``, read-only mounts)."""
    check_writable(path, option, directory=False)
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        with tempfile.NamedTemporaryFile(dir=path.parent, prefix=f".{path.name}."):
            pass
    except OSError as err:
        _fail(f"{option} {path}: cannot write there ({err.strerror or err})")


def _check_time_limit(value: float | None, option: str) -> None:
    """An option in seconds: a finite number > 0 (None: not given)."""
    if value is not None and not (math.isfinite(value) and value > 0):
        _fail(f"{option} {value:g}: give a finite number of seconds > 0")


def _import_agents(module: str) -> Any:
    import importlib

    try:
        return importlib.import_module(module)
    except ImportError as exc:
        _fail(f"{exc}; install the agents extra: pip install -e '.[agents]'")


MAX_EVAL_SEEDS = 100_000  # a range past this is a typo (0-99999999999), not an evaluation


def _seed_list(text: str) -> list[int]:
    """``--seeds``: comma-separated integers >= 0 or ranges ``lo-hi`` (inclusive), at least
    one; repeated seeds count once."""
    import re

    parts = [p.strip() for p in text.split(",")]
    if not any(parts):
        _fail(f"--seeds {text!r}: give at least one seed (comma-separated integers >= 0)")
    seeds: list[int] = []
    for part in filter(None, parts):
        m = re.fullmatch(r"(\d+)\s*-\s*(\d+)", part)
        if m is not None:
            lo, hi = int(m[1]), int(m[2])
            if lo > hi:
                _fail(f"--seeds {text!r}: range {part!r} runs backwards; write {hi}-{lo}")
            if hi > MAX_SEED:
                _fail(f"--seeds {text!r}: seeds must be <= {MAX_SEED} (2**63 - 1), got {hi}")
            if hi - lo + 1 + len(seeds) > MAX_EVAL_SEEDS:
                _fail(f"--seeds {text!r}: {hi - lo + 1:,} seeds in {part!r}; at most "
                      f"{MAX_EVAL_SEEDS:,} seeds in all")  # fmt: skip
            seeds += range(lo, hi + 1)
            continue
        try:
            seed = int(part)
        except ValueError:
            _fail(
                f"--seeds {text!r}: expected comma-separated integers >= 0 or ranges lo-hi "
                f"(e.g. 101-110), got {part!r}"
            )
        if seed < 0:
            _fail(f"--seeds {text!r}: seeds must be >= 0, got {seed}")
        if seed > MAX_SEED:
            _fail(f"--seeds {text!r}: seeds must be <= {MAX_SEED} (2**63 - 1), got {seed}")
        seeds.append(seed)
    return list(dict.fromkeys(seeds))


# Options several commands share, defined once.
traces_dir_option = click.option(
    "--traces-dir",
    type=click.Path(file_okay=False, path_type=Path),
    default=None,
    help="Trace root (default: $DLCLUSTER_TRACES, else ../shared/traces).",
)
scenario_option = click.option(
    "--scenario", required=True, help="Preset name (dlcluster list scenarios) or YAML."
)
policy_option = click.option(
    "--policy",
    default="fcfs",
    show_default=True,
    help="Registered name (dlcluster list policies) or package.module:Class.",
)
policy_args_option = click.option(
    "--policy-arg",
    "policy_args",
    multiple=True,
    metavar="KEY=VALUE",
    help="Policy parameter (repeatable).",
)
seed_option = click.option(
    "--seed",
    type=click.IntRange(min=0, max=MAX_SEED),
    default=None,
    help="Overrides the scenario's seed.",
)

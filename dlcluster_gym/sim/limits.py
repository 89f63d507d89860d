"""A wall-clock time limit around a run: :func:`time_limit`.

In the main thread of a POSIX process (``dlcluster simulate``, a leaderboard's worker
processes) the limit is a ``SIGALRM`` interval timer whose handler raises :class:`TimeUp`:
it interrupts pure-Python loops and blocking sleeps alike, so a policy whose ``schedule()``
never returns is stopped too. ``TimeUp`` is a ``BaseException``, so a policy's ``except
Exception`` does not swallow it, and the timer fires again every second until the run
unwinds. Elsewhere (another thread, or no ``SIGALRM``) it is raised asynchronously in the
running thread (``PyThreadState_SetAsyncExc``), which interrupts Python code but not a
blocking call. It leaves the limited block as :class:`~dlcluster_gym.errors.TimeLimitError`;
the engine adds the policy, the simulated time and the trigger when it strikes inside
``schedule()``.
"""

from __future__ import annotations

import contextlib
import ctypes
import math
import signal
import threading
from collections.abc import Iterator

from dlcluster_gym.errors import ConfigError, TimeLimitError

REPEAT_S = 1.0  # the timer fires again after this while the run has not unwound


class TimeUp(BaseException):
    """Raised inside the limited block when its time is up (a ``BaseException``: a policy's
    ``except Exception`` lets it through); it leaves the block as ``TimeLimitError``."""


def check_time_limit(value: object, name: str = "time_limit_s") -> float | None:
    """``value`` as a limit in seconds (None: no limit); a :class:`ConfigError` naming
    ``name`` unless it is a finite number > 0."""
    if value is None:
        return None
    ok = isinstance(value, int | float) and not isinstance(value, bool)
    if not ok or not math.isfinite(value) or value <= 0:
        raise ConfigError(f"{name} must be a finite number of seconds > 0, got {value!r}")
    return float(value)


def limit_message(limit_s: float, what: str) -> str:
    return f"{what} ran past its time limit of {limit_s:g} s (wall clock)"


@contextlib.contextmanager
def time_limit(limit_s: float | None, what: str = "the run") -> Iterator[None]:
    """Raise :class:`TimeLimitError` in the calling thread once ``limit_s`` seconds of wall
    clock have passed inside the block (no limit when None)."""
    limit = check_time_limit(limit_s)
    if limit is None:
        yield
        return
    message = limit_message(limit, what)
    main = threading.current_thread() is threading.main_thread()
    guard = _alarm(limit) if main and hasattr(signal, "setitimer") else _async(limit)
    try:
        with guard:
            yield
    except TimeUp:
        raise TimeLimitError(message) from None
    except TimeLimitError as exc:  # the engine's, with the policy's context
        raise TimeLimitError(f"{exc} when {message}") from None


@contextlib.contextmanager
def _alarm(limit: float) -> Iterator[None]:
    def handler(signum: int, frame: object) -> None:
        raise TimeUp

    previous = signal.signal(signal.SIGALRM, handler)
    signal.setitimer(signal.ITIMER_REAL, limit, REPEAT_S)
    try:
        yield
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        # None: a handler installed outside Python, which cannot be put back; the default then
        signal.signal(signal.SIGALRM, signal.SIG_DFL if previous is None else previous)


@contextlib.contextmanager
def _async(limit: float) -> Iterator[None]:
    tid = threading.get_ident()
    lock = threading.Lock()
    state = {"armed": True, "fired": False}

    def fire() -> None:
        with lock:
            if state["armed"]:
                state["fired"] = True
                ctypes.pythonapi.PyThreadState_SetAsyncExc(
                    ctypes.c_ulong(tid), ctypes.py_object(TimeUp)
                )

    timer = threading.Timer(limit, fire)
    timer.daemon = True
    timer.start()
    try:
        yield
    finally:
        with lock:
            state["armed"] = False
            if state["fired"]:  # not delivered yet: take it back
                ctypes.pythonapi.PyThreadState_SetAsyncExc(ctypes.c_ulong(tid), None)
        timer.cancel()

"""Worker processes that end with the process that started them.

The package runs work in process pools in two places: the leaderboard's local backend (one
cell per task) and the placement agent's rollout labelling (one episode per task). Both pass
:func:`die_with_parent` as the pool's initializer, so that killing the driver, even with
SIGKILL, leaves no worker running on, re-parented to init.
"""

from __future__ import annotations

import contextlib
import ctypes
import os
import signal
import sys
import threading
import time

PR_SET_PDEATHSIG = 1  # Linux prctl option: a signal this process gets when its parent dies
PARENT_POLL_S = 1.0  # how often a worker checks that its driver still runs


def die_with_parent(parent: int) -> None:
    """Worker initializer: end this process when the driver ``parent`` ends, however it ends
    (SIGKILL included), instead of living on re-parented to init. On Linux the kernel sends
    SIGKILL when the parent dies (``prctl(PR_SET_PDEATHSIG)``); everywhere a daemon thread
    checks every :data:`PARENT_POLL_S` seconds that the parent is still ``parent``. The pool's
    resource tracker exits on its own once the driver and its workers are gone.

    Use it as ``ProcessPoolExecutor(..., initializer=die_with_parent,
    initargs=(os.getpid(),))``."""
    if sys.platform.startswith("linux"):
        with contextlib.suppress(Exception):  # no libc: the thread below still watches
            libc = ctypes.CDLL(None, use_errno=True)
            libc.prctl(PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)
    if os.getppid() != parent:  # the driver died before the line above ran
        os._exit(1)

    def watch() -> None:
        while True:
            time.sleep(PARENT_POLL_S)
            if os.getppid() != parent:
                os._exit(1)

    threading.Thread(target=watch, name="watch-driver", daemon=True).start()

"""Numba's on-disk cache of the compiled kernels, kept in step with their sources.

Numba keys a cached function by its own file's timestamp and size only. A compiled function
in ``links_kernel.py`` inlines functions of ``stretch_kernel.py`` and ``layout_kernel.py``;
when only those files change, it keeps their old machine code. The result is silently stale,
or numba's runtime crashes. This holds after a ``git pull`` on an editable install and after
a package upgrade: numba's cache files are not part of the installed package, so an upgrade
does not remove them.

So the kernels' cache is keyed as a whole. A hash of every kernel source is kept in a file
beside the cached files. When the hash differs, the kernels' cached files are deleted before
anything is loaded from them, and numba compiles afresh and writes them again.
:func:`ensure_fresh` does this once per process and cache folder. The kernel modules compile
through :func:`compiled`, which calls it before any compiled function runs.

Compiling takes about 30 s for the link-sharing kernels (the first link-sharing run on a
machine, or after the kernels' sources change) and about 3 s for the Scheduler env's slot
rows and keyed estimates (``slot_kernel``, ``estimate_kernel``), so the first compilation of
one of these kernels in a process logs one line (logger ``dlcluster_gym.perf.kernel_cache``,
level WARNING, so it shows on stderr without any logging set up) that says so and where the
result is cached. A numba listener on its ``numba:compile`` event sees only real
compilations, never loads from the cache. Silence it with
``logging.getLogger("dlcluster_gym.perf.kernel_cache").setLevel(logging.ERROR)``.
"""

from __future__ import annotations

import hashlib
import logging
from collections.abc import Callable
from pathlib import Path
from typing import Any

try:  # numba is a core dependency; the Python paths remain for platforms without it
    from numba import njit
    from numba.core import event as _numba_event
except ImportError:  # pragma: no cover - exercised only where numba is absent
    njit = None
    _numba_event = None

HAVE_NUMBA = njit is not None

KERNELS = (
    "estimate_kernel", "layout_kernel", "links_kernel", "potential_kernel", "slot_kernel",
    "stretch_kernel", "traffic_kernel",
)  # fmt: skip
"""The modules of ``dlcluster_gym.perf`` with compiled functions, and whose sources key the
cache (any of them may inline another's functions)."""
MARKER = "dlcluster_kernels.sha256"
COMPILE_S = 30
"""About how long compiling every kernel takes, in seconds (29-32 s measured on one core of a
2-core Xeon VM, from a first ``reset()`` of a link-sharing scenario)."""
_HERE = Path(__file__).resolve().parent
_checked: set[Path] = set()
_log = logging.getLogger(__name__)


def sources_hash(folder: Path = _HERE) -> str:
    """SHA-256 over the kernel modules' sources in ``folder``."""
    h = hashlib.sha256()
    for name in KERNELS:
        h.update(name.encode())
        h.update((folder / f"{name}.py").read_bytes())
    return h.hexdigest()


def refresh(cache_dir: Path, digest: str) -> bool:
    """Delete the kernels' cached files in ``cache_dir`` unless its marker holds ``digest``,
    then write the marker; True when files were deleted. A folder that cannot be written is
    left alone (numba then cannot write its cache there either)."""
    marker = cache_dir / MARKER
    try:
        if marker.read_text() == digest:
            return False
    except OSError:
        pass  # no marker yet: a cache written before this check, or none
    removed = False
    try:
        for name in KERNELS:
            for path in (*cache_dir.glob(f"{name}.*.nbi"), *cache_dir.glob(f"{name}.*.nbc")):
                path.unlink(missing_ok=True)
                removed = True
        if cache_dir.is_dir():
            marker.write_text(digest)
    except OSError:
        return removed
    return removed


def ensure_fresh(dispatcher: Any) -> None:
    """Refresh the cache folder of the compiled function ``dispatcher`` (a numba dispatcher
    with ``cache=True``) once per process."""
    cache_dir = _cache_dir(dispatcher)
    if cache_dir in _checked:
        return
    _checked.add(cache_dir)
    refresh(cache_dir, sources_hash())


def compiled(fn: Callable[..., Any], *, numpy_errors: bool = True) -> Any:
    """``fn`` compiled by numba with its on-disk cache (``error_model="numpy"`` unless
    ``numpy_errors`` is False), the cache folder checked against the kernel sources first
    (:func:`ensure_fresh`). Only where :data:`HAVE_NUMBA`."""
    assert njit is not None
    jit = njit(cache=True, error_model="numpy") if numpy_errors else njit(cache=True)
    out = jit(fn)
    ensure_fresh(out)
    return out


def _cache_dir(dispatcher: Any) -> Path:
    path = getattr(getattr(dispatcher, "_cache", None), "_cache_path", None)
    return Path(path) if path else _HERE / "__pycache__"


def compile_message(cache_dir: Path) -> str:
    """The line logged when a process first compiles one of the kernels."""
    return (
        f"dlcluster-gym: compiling the simulator's kernels (first run only, up to about "
        f"{COMPILE_S} s; cached afterwards in {cache_dir})"
    )


_Listener: Any = _numba_event.Listener if _numba_event is not None else object


class CompileNotice(_Listener):
    """Logs :func:`compile_message` at the first compilation of a kernel of ``KERNELS`` in
    this process, and nothing after (numba compiles each function and signature separately;
    one line covers them all). Listens to numba's ``numba:compile`` event."""

    def __init__(self) -> None:
        self.announced = False

    def on_start(self, event: Any) -> None:
        if self.announced:
            return
        dispatcher = (getattr(event, "data", None) or {}).get("dispatcher")
        module = getattr(getattr(dispatcher, "py_func", None), "__module__", "")
        if module.rpartition(".")[2] not in KERNELS or not module.startswith(__package__ or ""):
            return  # numba's own helpers and other libraries' functions compile silently
        self.announced = True
        _log.warning(compile_message(_cache_dir(dispatcher)))

    def on_end(self, event: Any) -> None:
        pass


NOTICE = CompileNotice()
if _numba_event is not None:
    _numba_event.register("numba:compile", NOTICE)

"""``--out FILE`` for the benchmark scripts: what a run prints, kept as a markdown page.

The docs include these pages (``docs/performance.md``), so every figure there comes from a
run of the script named in the page, with the machine, the command, the date and the load
average it ran under. Printed lines become: a markdown table line (``|...``) stays a table
line, a comment (``# ...``) becomes a sentence, anything else goes into a code block.
"""

from __future__ import annotations

import contextlib
import datetime as dt
import io
import os
import platform
import shlex
import sys
import time
from collections.abc import Iterator
from pathlib import Path


def _machine() -> str:
    cpu = platform.processor() or platform.machine()
    return f"{cpu}, {os.cpu_count()} cores, Python {platform.python_version()}"


def render(lines: list[str]) -> list[str]:
    """Printed lines as markdown (tables kept, comments as text, the rest in code blocks)."""
    out: list[str] = []
    code: list[str] = []

    def flush() -> None:
        if code:
            out.extend(["", "```text", *code, "```", ""])
            code.clear()

    prev = ""
    for line in lines:
        if line.startswith("|"):
            flush()
            if not prev.startswith("|"):
                out.append("")
            out.append(line)
        elif line.startswith("# "):
            flush()
            out.extend(["", line[2:].strip()])
        elif line.strip():
            code.append(line)
        prev = line
    flush()
    return out


def reference_cpu_s(repeat: int = 7) -> float:
    """Fewest CPU seconds, over ``repeat`` runs, of a fixed pure-Python loop (integer
    arithmetic and dict stores, the kind of work the simulator's Python side does): the
    machine's speed, so that pages written on different machines or days can be compared
    (lower is faster). Rough: on a shared cloud machine it varies by tens of percent from
    minute to minute."""
    times = []
    for _ in range(repeat):
        t0 = time.process_time()
        x, seen = 0, {}
        for i in range(1_000_000):
            x = (x * 31 + i) % 1_000_003
            seen[x & 1023] = i
        times.append(time.process_time() - t0)
    return min(times)  # the least disturbed run: the others only add interference


@contextlib.contextmanager
def markdown_copy(path: str | None, title: str) -> Iterator[None]:
    """Inside, everything printed is also written to ``path`` (when given) as a markdown
    fragment headed by the command, the machine, the date and the load averages."""
    if not path:
        yield
        return
    buf = io.StringIO()
    real = sys.stdout
    start_load = os.getloadavg()[0]
    speed = reference_cpu_s()
    started = dt.datetime.now(dt.timezone.utc).strftime("%Y-%m-%d %H:%M UTC")

    class _Tee(io.TextIOBase):
        def write(self, s: str) -> int:
            real.write(s)
            return buf.write(s)

        def flush(self) -> None:
            real.flush()

    sys.stdout = _Tee()
    try:
        yield
    finally:
        sys.stdout = real
    command = "python " + " ".join(shlex.quote(a) for a in [_rel(sys.argv[0]), *sys.argv[1:]])
    head = [
        f"**{title}.** Written by `{command}` on {started}: {_machine()}; load average "
        f"{start_load:.1f} at the start, {os.getloadavg()[0]:.1f} at the end (a load above "
        "the core count means other work shared the machine: compare CPU seconds); machine "
        f"speed {speed:.3f} CPU s (`bench_out.reference_cpu_s`, a fixed pure-Python loop; "
        "lower is faster: compare pages written on different machines by it).",
    ]
    text = "\n".join([*head, *render(buf.getvalue().splitlines())]).rstrip() + "\n"
    target = Path(path)
    target.parent.mkdir(parents=True, exist_ok=True)
    tmp = target.with_suffix(target.suffix + ".tmp")
    tmp.write_text(text)
    tmp.replace(target)


def _rel(script: str) -> str:
    p = Path(script).resolve()
    root = Path(__file__).resolve().parents[2]
    return p.relative_to(root).as_posix() if p.is_relative_to(root) else script

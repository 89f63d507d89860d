"""One figure per scenario (or per single run): JCT CDFs, average JCT and makespan bars, GPU
utilization and jobs remaining over time, communication overhead. PNG bytes, Agg backend."""

from __future__ import annotations

import io
import math
from dataclasses import dataclass
from typing import Any

import numpy as np

CDF_POINTS = 400  # quantiles drawn per CDF line


@dataclass
class Series:
    """What the figure shows for one entrant: pooled JCTs, bar values (mean, 95% CI half-width)
    and one seed's time series (``t_s``, utilization in [0, 1], jobs remaining)."""

    label: str
    jct_s: np.ndarray
    avg_jct_s: tuple[float, float]
    makespan_s: tuple[float, float]
    comm_overhead: tuple[float, float]
    t_s: np.ndarray
    utilization: np.ndarray
    remaining: np.ndarray


def _bars(ax: Any, series: list[Series], attr: str, scale: float, ylabel: str, colors: Any) -> None:
    vals = [getattr(s, attr) for s in series]
    means = [v[0] * scale for v in vals]
    errs = [v[1] * scale if math.isfinite(v[1]) else 0.0 for v in vals]
    x = np.arange(len(series))
    ax.bar(x, means, yerr=errs, color=colors, capsize=3)
    ax.set_xticks(x, [s.label for s in series], rotation=60, ha="right", fontsize=7)
    ax.set_ylabel(ylabel)


def scenario_figure(title: str, series: list[Series]) -> bytes:
    """The six-panel figure for ``series`` as PNG bytes."""
    import matplotlib

    matplotlib.use("Agg", force=False)
    import matplotlib.pyplot as plt

    cmap = plt.get_cmap("tab20")  # dark shades first, then the light ones
    colors = [cmap((2 * i) % 20 + (i // 10) % 2) for i in range(len(series))]
    fig, axes = plt.subplots(2, 3, figsize=(15, 8.5))
    fig.suptitle(title)
    ax = axes[0, 0]
    for s, c in zip(series, colors, strict=True):
        if s.jct_s.size:
            q = np.linspace(0, 1, min(CDF_POINTS, s.jct_s.size))
            ax.plot(np.quantile(s.jct_s, q) / 3600, q, label=s.label, color=c)
    ax.set_xscale("log")
    ax.set_xlabel("JCT (h)")
    ax.set_ylabel("fraction of jobs")
    ax.set_title("JCT CDF (all seeds)")
    ax.legend(fontsize=6)
    _bars(axes[0, 1], series, "avg_jct_s", 1 / 3600, "avg JCT (h)", colors)
    axes[0, 1].set_title("average JCT (mean, 95% CI)")
    _bars(axes[0, 2], series, "makespan_s", 1 / 3600, "makespan (h)", colors)
    axes[0, 2].set_title("makespan (mean, 95% CI)")
    for ax, attr, label in (
        (axes[1, 0], "utilization", "GPU utilization"),
        (axes[1, 1], "remaining", "jobs remaining"),
    ):
        for s, c in zip(series, colors, strict=True):
            if s.t_s.size:
                ax.step(s.t_s / 3600, getattr(s, attr), where="post", color=c, lw=0.8)
        ax.set_xlabel("time (h)")
        ax.set_ylabel(label)
        ax.set_title(f"{label} over time (first seed)")
    _bars(axes[1, 2], series, "comm_overhead", 1.0, "exposed comm / compute", colors)
    axes[1, 2].set_title("communication overhead (mean, 95% CI)")
    fig.tight_layout()
    buf = io.BytesIO()
    fig.savefig(buf, format="png", dpi=90)
    plt.close(fig)
    return buf.getvalue()

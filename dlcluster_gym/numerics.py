"""Elementwise exp/log functions whose results do not depend on the CPU.

NumPy chooses its SIMD kernels when it is imported: on a CPU with AVX-512 its float64 ``exp``,
``log``, ``log1p``, ``log2``, ``expm1`` (and ``geomspace``, built on them) run other
approximations than on a CPU without it, and differ in the last bit for some inputs. A
scheduler's discrete choices amplify such bits: Tiresias on the Dally 8-rack cluster (1,000
jobs, load 1.0, seed 102) had an average JCT of 177,822 s with AVX-512 and 180,418 s without,
because a few sampled job durations differed in their last bit.

The functions here apply the C library's scalar function to each element (``math``), which is
what NumPy itself runs where it has no SIMD kernel; so a simulation gives the same bits on
every x86-64 Linux machine (glibc), with or without AVX-512. They are for the values that
decide a run (sampled durations, features an agent sees, a policy's tables); they cost about
0.1 us per element, so keep them off per-event hot loops over large arrays.
"""

from __future__ import annotations

import math
from collections.abc import Callable

import numpy as np
from numpy.typing import ArrayLike, NDArray

__all__ = ["exp", "expm1", "geomspace", "log", "log1p", "log2"]


def _elementwise(fn: Callable[[float], float]) -> Callable[[ArrayLike], NDArray[np.float64]]:
    ufunc = np.frompyfunc(fn, 1, 1)

    def apply(x: ArrayLike) -> NDArray[np.float64]:
        return np.asarray(ufunc(np.asarray(x, dtype=np.float64)), dtype=np.float64)

    apply.__name__ = fn.__name__
    apply.__doc__ = f"``math.{fn.__name__}`` of each element, as a float64 array."
    return apply


exp = _elementwise(math.exp)
expm1 = _elementwise(math.expm1)
log = _elementwise(math.log)
log1p = _elementwise(math.log1p)
log2 = _elementwise(math.log2)


def geomspace(start: float, stop: float, num: int) -> NDArray[np.float64]:
    """``num`` points from ``start`` to ``stop`` (both > 0) evenly spaced on a log scale, the
    end points exact (as ``numpy.geomspace``, whose last bits depend on the CPU)."""
    if not (start > 0 and stop > 0):
        raise ValueError(f"geomspace needs start and stop > 0, got {start!r} and {stop!r}")
    out = exp(np.linspace(math.log(start), math.log(stop), int(num)))
    if out.size:
        out[0], out[-1] = start, stop
    return out

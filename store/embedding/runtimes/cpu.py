"""What the CPU can do for the embedding backends, from ``/proc/cpuinfo`` (nothing imported).

:func:`native_bf16` decides the precision the ``openvino`` backend computes in
(:mod:`ingestd.store.embedding.runtimes.openvino`), and whether a daemon without OpenVINO says
once that the ``openvino`` extra would embed about three times as fast
(:mod:`ingestd.daemon.sync.profiles.profiles`). ``$INGESTD_CPU_BF16`` (:data:`BF16_ENV`)
overrides what the flags say: ``0`` makes this CPU act as one without native bfloat16
(OpenVINO computes in float32), ``1`` as one with it. Tests and ``bench/ingest.py`` use
it to measure, on a CPU with bfloat16, what most laptops run.
"""

from __future__ import annotations

import functools
import os
from collections.abc import Iterable
from pathlib import Path

__all__ = ["BF16_ENV", "BF16_FLAGS", "cpu_flags", "native_bf16", "usable_cores"]


#: ``/proc/cpuinfo`` flags of native bfloat16 matrix products (Intel AMX, AVX512-BF16):
#: where OpenVINO's CPU plugin computes in bfloat16 by default.
BF16_FLAGS = frozenset({"amx_bf16", "avx512_bf16"})
#: The environment variable that overrides :func:`native_bf16`: ``0`` (no) or ``1`` (yes).
BF16_ENV = "INGESTD_CPU_BF16"


@functools.cache
def cpu_flags(cpuinfo: Path = Path("/proc/cpuinfo")) -> frozenset[str]:
    """The ``flags`` of the first processor in ``cpuinfo`` (Linux); empty where unreadable."""
    try:
        text = cpuinfo.read_text(errors="replace")
    except OSError:
        return frozenset()
    for line in text.splitlines():
        if line.startswith("flags"):
            return frozenset(line.partition(":")[2].split())
    return frozenset()


def native_bf16(flags: Iterable[str] | None = None) -> bool:
    """Whether this CPU multiplies bfloat16 natively (one of :data:`BF16_FLAGS`).

    Args:
        flags: the CPU's flags; ``None``: ``$INGESTD_CPU_BF16`` when set, else
            :func:`cpu_flags` (``False`` where ``/proc/cpuinfo`` cannot be read).

    Raises:
        ValueError: ``$INGESTD_CPU_BF16`` is set to something other than ``0`` or ``1``.
    """
    if flags is None:
        forced = os.environ.get(BF16_ENV, "").strip()
        if forced:
            if forced not in ("0", "1"):
                raise ValueError(f"{BF16_ENV} must be 0 or 1 (got {forced!r})")
            return forced == "1"
        flags = cpu_flags()
    return not BF16_FLAGS.isdisjoint(flags)


def usable_cores() -> int:
    """Logical cores this process may run on (its affinity mask where the OS has one)."""
    if hasattr(os, "sched_getaffinity"):  # Linux
        return len(os.sched_getaffinity(0))
    return os.cpu_count() or 1

"""What the CPU can do for the embedding backends, from ``/proc/cpuinfo`` (nothing imported).

:func:`native_bf16` decides the default backend
(:func:`ingestd.daemon.config.embedding.default_backend`) and the precision the
``openvino`` backend computes in (:mod:`ingestd.store.embedding.openvino`).
"""

from __future__ import annotations

import functools
from pathlib import Path

__all__ = ["BF16_FLAGS", "native_bf16"]


#: ``/proc/cpuinfo`` flags of native bfloat16 matrix products (Intel AMX, AVX512-BF16):
#: where OpenVINO's CPU plugin computes in bfloat16 by default.
BF16_FLAGS = frozenset({"amx_bf16", "avx512_bf16"})


@functools.cache
def native_bf16(cpuinfo: Path = Path("/proc/cpuinfo")) -> bool:
    """Whether this CPU multiplies bfloat16 natively (one of :data:`BF16_FLAGS`).

    Reads the ``flags`` line of ``cpuinfo`` (Linux); ``False`` where it cannot be read.
    """
    try:
        text = cpuinfo.read_text(errors="replace")
    except OSError:
        return False
    for line in text.splitlines():
        if line.startswith("flags"):
            return not BF16_FLAGS.isdisjoint(line.partition(":")[2].split())
    return False

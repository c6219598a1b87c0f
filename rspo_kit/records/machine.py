"""What machine a checkpoint was built on: the facts its float rounding can depend on.

A warm start built by one recipe on one thread repeats bit for bit on one machine, but not across
machines (three machines built three different ALFWorld checkpoints from one recipe), and MKL, oneDNN and torch's own
kernels are chosen by the CPU's vector instructions. So every warm start records this next to its SFT
history: two machines with the same record are the ones where a rebuild can be expected to repeat.
"""

from __future__ import annotations

import platform
from pathlib import Path


def _cpuinfo(field: str) -> str | None:
    """The value of the first ``field`` line of ``/proc/cpuinfo``; None where there is none."""
    try:
        lines = Path("/proc/cpuinfo").read_text().splitlines()
    except OSError:
        return None
    return next((line.split(":", 1)[1].strip() for line in lines if line.startswith(field)), None)


def cpu_model() -> str:
    """The CPU's model name (``/proc/cpuinfo`` on Linux), else what ``platform`` knows, else ``""``."""
    return _cpuinfo("model name") or platform.processor() or platform.machine()


# the instruction-set extensions that kernel dispatch looks at (x86 names as /proc/cpuinfo spells them)
SIMD_PREFIXES = ("sse4", "avx", "fma", "f16c", "amx")


def simd_flags(flags: str | None = None) -> list[str]:
    """The vector-instruction flags of this CPU (sorted), from ``/proc/cpuinfo`` unless ``flags`` is
    given (its ``flags`` line's value); ``[]`` where the file has none (macOS, ARM's ``Features``).

    >>> simd_flags("fpu sse2 avx2 fma avx512f amx_tile vme")
    ['amx_tile', 'avx2', 'avx512f', 'fma']
    """
    if flags is None:
        flags = _cpuinfo("flags") or ""
    return sorted({f for f in flags.split() if f.startswith(SIMD_PREFIXES)})


def machine_record() -> dict:
    """CPU, core count, torch build and threads, and the library versions that shape the numerics."""
    import os

    import tokenizers
    import torch
    import transformers

    return {
        "cpu": cpu_model(),
        "cores": os.cpu_count(),
        "simd": simd_flags(),
        # the widest kernels torch dispatches to here (e.g. "AVX512", "AVX2"; ATEN_CPU_CAPABILITY caps it)
        "torch_cpu_capability": torch.backends.cpu.get_cpu_capability(),
        "python": platform.python_version(),
        "torch": torch.__version__,
        "torch_threads": torch.get_num_threads(),
        "mkl": torch.backends.mkl.is_available(),
        "transformers": transformers.__version__,
        "tokenizers": tokenizers.__version__,
    }

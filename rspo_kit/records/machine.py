"""What machine a checkpoint was built on: the facts its float rounding can depend on.

A warm start built by one recipe on one thread repeats bit for bit on one machine, but not across
machines (session 27: three ALFWorld builds, three checkpoints), and MKL and oneDNN choose their
kernels by CPU. So every warm start records this next to its SFT history.
"""

from __future__ import annotations

import platform
from pathlib import Path


def cpu_model() -> str:
    """The CPU's model name (``/proc/cpuinfo`` on Linux), else what ``platform`` knows, else ``""``."""
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()


def machine_record() -> dict:
    """CPU, core count, torch build and threads, and the library versions that shape the numerics."""
    import os

    import tokenizers
    import torch
    import transformers

    return {
        "cpu": cpu_model(),
        "cores": os.cpu_count(),
        "python": platform.python_version(),
        "torch": torch.__version__,
        "torch_threads": torch.get_num_threads(),
        "mkl": torch.backends.mkl.is_available(),
        "transformers": transformers.__version__,
        "tokenizers": tokenizers.__version__,
    }

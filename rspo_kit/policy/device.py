"""Device and dtype, resolved in one place: CUDA + bf16 when available, otherwise CPU + fp32."""

from __future__ import annotations

from dataclasses import dataclass

import torch


@dataclass(frozen=True)
class DeviceSpec:
    device: torch.device
    dtype: torch.dtype


def resolve_device(prefer: str = "auto") -> DeviceSpec:
    """``prefer``: "auto" (CUDA if present), "cuda" or "cpu"."""
    if prefer not in ("auto", "cuda", "cpu"):
        raise ValueError(f"device must be 'auto', 'cuda' or 'cpu', got {prefer!r}")
    if prefer == "cuda" and not torch.cuda.is_available():
        raise RuntimeError("device='cuda' was asked for but torch sees no CUDA device")
    if prefer != "cpu" and torch.cuda.is_available():
        dtype = torch.bfloat16 if torch.cuda.is_bf16_supported() else torch.float16
        return DeviceSpec(torch.device("cuda"), dtype)
    return DeviceSpec(torch.device("cpu"), torch.float32)

"""Per-unit weights for off-policy (replayed) samples in the actor update (DESIGN §1, step 5).

Replayed trajectories were sampled by the explorer B, not by the actor A being updated, so
their units carry a weight in the policy loss:

- ``"none"``: w = 1, treat them as on-policy;
- ``"truncated_is"``: w = min(π_A / π_B, c), detached — importance sampling truncated at c so a
  unit that A now likes far more than B did cannot dominate the batch (the default, c = 2);
- ``"luffy"``: w = 1 here; LUFFY's correction (Yan et al. 2025) is the policy shaping
  f(π) = π/(π+γ) inside the loss, so the caller passes ``shaped=True`` for these units to
  ``clipped_policy_loss``.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import TYPE_CHECKING, Literal, get_args

if TYPE_CHECKING:
    from torch import Tensor

# The run config takes its list of modes from here, so this module needs nothing of torch but the
# tensors it is given: reading a config (or the CLI's --help) does not import torch.
OffPolicyMode = Literal["none", "truncated_is", "luffy"]
OFFPOLICY_MODES: tuple[str, ...] = get_args(OffPolicyMode)


def _unit_weights(logp_current: Tensor, logp_behaviour: Tensor, is_clip: float) -> Tensor:
    return logp_current.new_ones(logp_current.shape)


def _truncated_is(logp_current: Tensor, logp_behaviour: Tensor, is_clip: float) -> Tensor:
    # exp may overflow to inf for a unit B found very unlikely; the clamp brings it back to c.
    return (logp_current - logp_behaviour).exp().clamp(max=is_clip)


OFFPOLICY_WEIGHTS: dict[str, Callable[[Tensor, Tensor, float], Tensor]] = {
    "none": _unit_weights,
    "truncated_is": _truncated_is,
    "luffy": _unit_weights,  # the shaping lives in clipped_policy_loss(shaped=...)
}


def offpolicy_weights(
    logp_current: Tensor, logp_behaviour: Tensor, mode: OffPolicyMode, is_clip: float = 2.0
) -> Tensor:
    """Detached weights (T,) for off-policy units; (T,), (T,) -> (T,).

    logp_current: (T,) log π_A of each unit under the actor now; logp_behaviour: (T,) log π_B
    under the policy that sampled it. Returns a tensor without gradient in the dtype of
    ``logp_current``; with ``"truncated_is"`` every weight is ≤ ``is_clip``.

    >>> import torch
    >>> offpolicy_weights(torch.log(torch.tensor([0.5, 0.9])), torch.log(torch.tensor([0.5, 0.1])), "truncated_is")
    tensor([1., 2.])
    """
    if mode not in OFFPOLICY_WEIGHTS:
        raise ValueError(f"mode must be one of {OFFPOLICY_MODES}, got {mode!r}")
    if not (math.isfinite(is_clip) and is_clip > 0):
        raise ValueError(f"is_clip must be a positive finite number, got {is_clip!r}")
    if logp_current.dim() != 1:
        raise ValueError(f"logp_current must have shape (N,), got {tuple(logp_current.shape)}")
    if logp_behaviour.shape != logp_current.shape:
        want, got = tuple(logp_current.shape), tuple(logp_behaviour.shape)
        raise ValueError(f"logp_behaviour must have shape {want}, got {got}")
    return OFFPOLICY_WEIGHTS[mode](logp_current.detach(), logp_behaviour.detach(), is_clip)


def weight_stats(w: Tensor, is_clip: float = 2.0) -> dict[str, float]:
    """Mean, max, min of the weights and ``clipped_frac``, the share sitting at ``is_clip``.

    Pass only the off-policy units' weights (on-policy units have w = 1 and would dilute the
    numbers). All values are NaN for an empty tensor.

    >>> import torch
    >>> weight_stats(torch.tensor([0.5, 2.0, 1.5, 2.0]))
    {'mean': 1.5, 'max': 2.0, 'min': 0.5, 'clipped_frac': 0.5}
    """
    if w.numel() == 0:
        return dict.fromkeys(("mean", "max", "min", "clipped_frac"), math.nan)
    w = w.detach()
    # Compare in w's dtype: float32(1.3) < 1.3, so a weight clamped to 1.3 would not count.
    at_clip = w >= w.new_tensor(is_clip)
    return {
        "mean": float(w.mean()),
        "max": float(w.max()),
        "min": float(w.min()),
        "clipped_frac": float(at_clip.float().mean()),
    }

"""Per-unit corrections for off-policy (replayed) samples in the actor update.

Replayed trajectories were sampled by the explorer B, not by the actor A being updated, so
their units carry a correction in the policy loss (``swap.offpolicy_clip``):

- ``"shifted"``: GePPO's generalised clip (Queeney et al. 2021), RSPO's J_off (paper Eq. 4): the
  ratio π_θ/π_B is clipped to [c − ε, c + ε] around c = π_old/π_B (``shifted_center``), weight 1;
- ``"none"``: w = 1, treat them as on-policy;
- ``"truncated_is"``: w = min(π_A / π_B, c), detached — importance sampling truncated at c so a
  unit that A now likes far more than B did cannot dominate the batch (c = ``swap.is_clip``, 2;
  the earlier group_mixing design's default);
- ``"luffy"``: w = 1 here; LUFFY's correction (Yan et al. 2025) is the policy shaping
  f(π) = π/(π+γ) inside the loss, so the caller passes ``shaped=True`` for these units to
  ``clipped_policy_loss``.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Literal, get_args

if TYPE_CHECKING:
    from torch import Tensor

# The run config takes its list of modes from here, so this module needs nothing of torch but the
# tensors it is given: reading a config (or the CLI's --help) does not import torch.
OffPolicyMode = Literal["shifted", "truncated_is", "luffy", "none"]
OFFPOLICY_MODES: tuple[str, ...] = get_args(OffPolicyMode)


@dataclass(frozen=True)
class OffPolicy:
    """What an update reads of the off-policy objective (``rspo_kit.train.update.update``; a run's
    ``SwapConfig.offpolicy``): the correction of replayed units (``clip``: ``swap.offpolicy_clip``),
    truncated_is's cap (``swap.is_clip``), and ``share``, the α of J = (1 − α)·J_on + α·J_off with each
    part its own token mean (the paper's loop under ``swap.offpolicy_weighting = "explicit"``; None:
    one token mean over the whole batch)."""

    clip: OffPolicyMode = "shifted"
    is_clip: float = 2.0
    share: float | None = None


def _unit_weights(logp_current: Tensor, logp_behaviour: Tensor, is_clip: float) -> Tensor:
    return logp_current.new_ones(logp_current.shape)


def _truncated_is(logp_current: Tensor, logp_behaviour: Tensor, is_clip: float) -> Tensor:
    # exp may overflow to inf for a unit B found very unlikely; the clamp brings it back to c.
    return (logp_current - logp_behaviour).exp().clamp(max=is_clip)


OFFPOLICY_WEIGHTS: dict[str, Callable[[Tensor, Tensor, float], Tensor]] = {
    "shifted": _unit_weights,  # the correction is the clip window's centre: shifted_center
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


# a log-ratio this far from 0 is a probability ratio past 1e13: the clamp keeps exp finite in float32
_MAX_LOG_CENTER = 30.0


def shifted_center(logp_old: Tensor, logp_behaviour: Tensor) -> Tensor:
    """GePPO's clip centre c = π_old/π_B per unit; (T,), (T,) -> (T,), detached.

    logp_old: log-probs under the policy before this update (π_θold); logp_behaviour: under the policy
    that sampled the unit (π_B). The ratio π_θ/π_B is clipped to [c − ε, c + ε]; where π_old = π_B,
    c = 1 and the window is PPO's.

    >>> import torch
    >>> shifted_center(torch.log(torch.tensor([0.5, 0.2])), torch.log(torch.tensor([0.5, 0.4])))
    tensor([1.0000, 0.5000])
    """
    log_c = (logp_old.detach() - logp_behaviour.detach()).clamp(-_MAX_LOG_CENTER, _MAX_LOG_CENTER)
    return log_c.exp()


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

"""Policy and value losses, KL penalties, entropies and health metrics for the update step.

A "unit" is whatever carries one log-prob: a token in ``free`` action mode, one candidate choice
in ``choice`` mode. The losses do not care which; they take flat (T,) tensors and a mask.

- ``clipped_policy_loss``: PPO's clipped surrogate (Schulman et al. 2017, Eq. 7) with optional
  off-policy sample weights, GePPO's shifted clip window (Queeney et al. 2021; RSPO's J_off) and LUFFY
  policy shaping (Yan et al. 2025) on chosen units;
- ``value_loss``: clipped value regression, as in OpenAI baselines' PPO2;
- ``kl_penalty``: the k1/k2/k3 per-unit KL estimators to a reference policy;
- ``entropy_from_logits`` and ``categorical_entropy``: policy entropy in free and choice mode;
- ``explained_variance``: how much of the return variance the critic explains.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Literal, get_args

import torch
from torch import Tensor

from rspo_kit.algos._index import check_1d, dense_ids, float_dtype

Aggregation = Literal["token_mean", "seq_mean"]
AGGREGATION_MODES: tuple[str, ...] = get_args(Aggregation)
KLKind = Literal["k1", "k2", "k3"]
KL_KINDS: tuple[str, ...] = get_args(KLKind)


def _token_mean(per_unit: Tensor, mask: Tensor, seq: Tensor | None) -> Tensor:
    """Σ loss·mask / Σ mask: every unit in the batch weighs the same; 0 when nothing is masked in."""
    return (per_unit * mask).sum() / mask.sum().clamp(min=1)


def _seq_mean(per_unit: Tensor, mask: Tensor, seq: Tensor | None) -> Tensor:
    """Mean over sequences of each sequence's unit mean: every sequence weighs the same."""
    if seq is None:
        raise ValueError("aggregation='seq_mean' needs seq, the sequence id of every unit")
    inverse, n_seq = dense_ids(seq)
    numerator = per_unit.new_zeros(n_seq).index_add(0, inverse, per_unit * mask)
    denominator = mask.new_zeros(n_seq).index_add(0, inverse, mask)
    present = denominator > 0  # sequences with no masked-in unit do not count
    # Divide by 1 where a sequence is empty (its numerator is 0) so no NaN reaches the gradient.
    per_seq = numerator / torch.where(present, denominator, torch.ones_like(denominator))
    return per_seq.sum() / present.sum().clamp(min=1)


AGGREGATIONS: dict[str, Callable[[Tensor, Tensor, Tensor | None], Tensor]] = {
    "token_mean": _token_mean,
    "seq_mean": _seq_mean,
}


@dataclass(frozen=True)
class PolicyLossOutput:
    """The policy loss to backpropagate and three detached health metrics (0-d tensors)."""

    loss: Tensor  # scalar, differentiable
    approx_kl: Tensor  # mean k3 estimate of KL(π_old ‖ π) over masked, unshaped units
    clip_frac: Tensor  # share of masked, unshaped units whose gradient clipping blocked
    ratio_mean: Tensor  # mean π/π_old over masked, unshaped units
    clipped: Tensor  # (T,) bool, detached: the units whose gradient clipping blocked


def clipped_policy_loss(
    logp: Tensor,
    old_logp: Tensor,
    advantages: Tensor,
    mask: Tensor,
    clip_low: float = 0.2,
    clip_high: float | None = None,
    weights: Tensor | None = None,
    shaped: Tensor | None = None,
    shaping_gamma: float = 0.1,
    aggregation: Aggregation = "token_mean",
    seq: Tensor | None = None,
    clip_center: Tensor | None = None,
) -> PolicyLossOutput:
    """PPO clipped surrogate per unit, with off-policy weights and LUFFY shaping; (T,) -> scalar.

    logp: (T,) current log-probs (differentiable); old_logp: (T,) log-probs of the policy that the
    ratio is taken against (detached here); advantages: (T,) (detached); mask: (T,) bool or float.
    clip_high defaults to clip_low (symmetric); a larger clip_high is DAPO's "clip-higher".
    weights: (T,) detached per-unit sample weights (e.g. truncated IS), default 1.
    shaped: (T,) bool, units that take LUFFY's shaped objective −A·w·f(π), f(π) = π/(π+γ) with
    π = exp(logp) and γ = ``shaping_gamma``, in place of the clipped ratio. seq: (T,) sequence
    ids, needed for ``aggregation="seq_mean"``. clip_center: (T,) detached centre c of each unit's clip
    window, default 1: the ratio r = π/π_old is clipped to [c − clip_low, c + clip_high]. GePPO's
    generalised clip (Queeney et al. 2021), RSPO's J_off (paper Eq. 4), passes old_logp = log π_B (the
    behaviour policy that sampled the unit) and c = π_θold/π_B, so the window sits where the policy
    stands before this update, not at 1; with π_θold = π_B it is PPO's own clip.

    The metrics leave shaped units out: their old_logp is another policy's (the explorer's), so
    their ratio measures the gap between the two policies, not the size of this update.
    """
    if aggregation not in AGGREGATIONS:
        raise ValueError(f"aggregation must be one of {AGGREGATION_MODES}, got {aggregation!r}")
    check_1d("logp", logp)
    for name, tensor in (("old_logp", old_logp), ("advantages", advantages), ("mask", mask)):
        check_1d(name, tensor, logp.shape[0])
    dtype = float_dtype(logp)
    mask_f = mask.to(dtype)
    advantages = advantages.detach().to(dtype)
    weights = torch.ones_like(advantages) if weights is None else weights.detach().to(dtype)
    shaped = torch.zeros_like(mask_f, dtype=torch.bool) if shaped is None else shaped.bool()
    high = clip_low if clip_high is None else clip_high
    center = torch.ones_like(advantages) if clip_center is None else clip_center.detach().to(dtype)
    check_1d("clip_center", center, logp.shape[0])

    # A shaped unit's ratio is unused; zeroing its log-ratio keeps a huge π/π_B from turning
    # into inf·0 = NaN in the gradient of the branch torch.where discards.
    log_ratio = torch.where(shaped, torch.zeros_like(logp), logp - old_logp.detach())
    ratio = torch.exp(log_ratio)
    pg_unclipped = -advantages * ratio
    # the window [c − ε_low, c + ε_high]: c = 1 is PPO's; GePPO's c = π_old/π_B (paper Eq. 4)
    pg_clipped = -advantages * torch.minimum(torch.maximum(ratio, center - clip_low), center + high)
    pg_loss = torch.maximum(pg_unclipped, pg_clipped)  # PPO (Schulman et al. 2017), Eq. 7, negated
    prob = torch.exp(logp)
    shaped_loss = -advantages * prob / (prob + shaping_gamma)  # LUFFY (Yan et al. 2025) f(π) = π/(π+γ)
    per_unit = weights * torch.where(shaped, shaped_loss, pg_loss)
    loss = AGGREGATIONS[aggregation](per_unit, mask_f, seq)

    with torch.no_grad():
        ppo_units = mask_f * (~shaped).to(dtype)
        n = ppo_units.sum().clamp(min=1)
        # the update's own step: π/π_old, which is r/c for a unit whose ratio is taken against π_B
        log_step = log_ratio - torch.log(center)  # exactly log_ratio where c = 1
        step = torch.exp(log_step)
        approx_kl = (((step - 1.0) - log_step) * ppo_units).sum() / n  # k3 (Schulman 2020)
        # Clipping is active where the clipped term is the larger loss: its gradient is 0 there.
        clipped = pg_clipped > pg_unclipped
        clip_frac = (clipped.to(dtype) * ppo_units).sum() / n
        ratio_mean = (step * ppo_units).sum() / n
    return PolicyLossOutput(
        loss=loss, approx_kl=approx_kl, clip_frac=clip_frac, ratio_mean=ratio_mean, clipped=clipped & ~shaped
    )


def value_loss(
    values: Tensor, old_values: Tensor, returns: Tensor, mask: Tensor, clip: float | None = 0.2
) -> Tensor:
    """0.5 · masked mean of max((v − R)², (clip(v, v_old − c, v_old + c) − R)²); scalar.

    values: (T,) current value predictions (differentiable); old_values: (T,) predictions at
    rollout time; returns: (T,) targets; mask: (T,). The clipped term keeps the critic from moving
    more than ``clip`` from its rollout-time prediction in one update (OpenAI baselines PPO2;
    Engstrom et al. 2020 discuss its effect). ``clip=None``: plain 0.5·(v − R)².
    """
    check_1d("values", values)
    for name, tensor in (("old_values", old_values), ("returns", returns), ("mask", mask)):
        check_1d(name, tensor, values.shape[0])
    returns = returns.detach()
    squared = (values - returns) ** 2
    if clip is not None:
        old_values = old_values.detach()
        clipped_values = old_values + torch.clamp(values - old_values, -clip, clip)
        squared = torch.maximum(squared, (clipped_values - returns) ** 2)
    return 0.5 * _token_mean(squared, mask.to(squared.dtype), None)


def _k1(log_ratio: Tensor) -> Tensor:
    return log_ratio


def _k2(log_ratio: Tensor) -> Tensor:
    return 0.5 * log_ratio**2


def _k3(log_ratio: Tensor) -> Tensor:
    return torch.expm1(-log_ratio) + log_ratio  # (r − 1) − log r with r = π_ref/π, always ≥ 0


KL_ESTIMATORS: dict[str, Callable[[Tensor], Tensor]] = {"k1": _k1, "k2": _k2, "k3": _k3}


def kl_penalty(logp: Tensor, ref_logp: Tensor, kind: KLKind = "k3") -> Tensor:
    """Per-unit estimate of KL(π ‖ π_ref) from samples of π; (T,) -> (T,).

    With log r = ref_logp − logp: k1 = −log r (unbiased, high variance, can be negative),
    k2 = ½(log r)² (biased, low variance), k3 = (r − 1) − log r (unbiased and ≥ 0; the estimator
    of GRPO, Shao et al. 2024, Eq. 4). Schulman 2020, "Approximating KL divergence".
    ``ref_logp`` is detached; the gradient flows through ``logp``.
    """
    if kind not in KL_ESTIMATORS:
        raise ValueError(f"kind must be one of {KL_KINDS}, got {kind!r}")
    return KL_ESTIMATORS[kind](logp - ref_logp.detach())


def _entropy_terms(logp: Tensor) -> Tensor:
    """−p·log p elementwise, 0 where p = 0 (log p = −inf) with a finite gradient."""
    prob = torch.exp(logp)
    finite_logp = torch.where(prob > 0, logp, torch.zeros_like(logp))
    return -prob * finite_logp


def entropy_from_logits(logits: Tensor) -> Tensor:
    """Entropy of softmax(logits) over the last axis; (..., V) -> (...).

    Half-precision logits are upcast to float32 inside; −inf logits (masked tokens) are fine.
    """
    compute = torch.promote_types(logits.dtype, torch.float32)
    logp = torch.log_softmax(logits.to(compute), dim=-1)
    return _entropy_terms(logp).sum(-1).to(logits.dtype)


def categorical_entropy(logp: Tensor, group: Tensor, n_groups: int | None = None) -> Tensor:
    """Choice-mode entropy H_g = −Σ_{c∈g} p_c log p_c per group of candidates; (T,) -> (G,).

    logp: (T,) each candidate's log-softmax over its group's candidates (already normalised);
    group: (T,) long, the index 0..G−1 of the step the candidate belongs to. G = ``n_groups`` or
    max(group) + 1; a group with no candidates has entropy 0. Differentiable in ``logp``.

    >>> categorical_entropy(torch.log(torch.tensor([0.5, 0.5, 1.0])), torch.tensor([0, 0, 1]))
    tensor([0.6931, 0.0000])
    """
    check_1d("logp", logp)
    check_1d("group", group, logp.shape[0])
    if n_groups is None:
        n_groups = int(group.max()) + 1 if group.numel() else 0
    return logp.new_zeros(n_groups).index_add(0, group, _entropy_terms(logp))


def explained_variance(pred: Tensor, target: Tensor) -> Tensor:
    """1 − Var(target − pred) / Var(target): 1 is a perfect critic, ≤ 0 no better than a constant.

    pred, target: same shape. Returns a detached 0-d tensor; NaN when all targets are equal
    (or there are none), where rounding would otherwise turn 0/0 into an arbitrary number.
    """
    with torch.no_grad():
        dtype = float_dtype(pred, target)
        target64 = target.to(torch.float64)
        if target64.numel() == 0 or target64.amax() == target64.amin():
            return torch.tensor(torch.nan, dtype=dtype, device=target.device)
        residual = target64 - pred.to(torch.float64)
        ev = 1.0 - residual.var(unbiased=False) / target64.var(unbiased=False)
        return ev.to(dtype)

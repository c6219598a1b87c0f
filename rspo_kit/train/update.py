"""One X-update (X = GRPO, PPO or GiGPO) of one policy on a batch of trajectories.

The recipe, for actor and explorer alike:

1. flatten the batch into steps; rewards per step come from the caller (the signal is the caller's
   choice: outcome for the actor, process for the explorer — this module never sees which);
2. a no-grad pre-pass where needed: the critic's values (PPO) and the actor's current log-probs of
   replayed steps (the ratio's denominator and the truncated-IS numerator);
3. advantages from the algorithm's pure function (``ADVANTAGES`` registry);
4. minibatch policy-gradient steps (round(S / ``minibatch_steps``) minibatches of equal size, within one
   step: ``minibatch_split``) with the clipped surrogate, off-policy weights, entropy bonus,
   the KL penalty to the frozen reference (``algo.kl_coef`` > 0), and the critic's clipped value loss
   (PPO); each minibatch's gradient is accumulated over passes of ``microbatch_steps`` steps of
   similar length.

A minibatch whose gradient is exactly 0 (no advantage, no entropy or KL term, or every unit clipped) takes
no optimizer step: Adam's momentum would otherwise keep moving the policy where the loss is flat.

A non-finite value that matters raises ``FloatingPointError``: critic values and targets, advantages,
a pass's loss, the gradient norm (before the optimizer step, which is then not taken) and the
parameters after a step. The trainer stops the run on it before anything of the iteration is saved.

Why one module of this length: the pre-pass, the equal-size minibatches, the off-policy weights and the
guards against a step on a zero or non-finite gradient are one update, whose order matters
(``tests/test_train.py`` and ``tests/test_swap.py`` check it step by step).
"""

from __future__ import annotations

import math
from collections.abc import Callable
from contextlib import AbstractContextManager
from dataclasses import dataclass, field

import torch

from rspo_kit.algos import (
    clipped_policy_loss,
    explained_variance,
    gigpo_advantages,
    grpo_advantages,
    kl_penalty,
    offpolicy_weights,
    shifted_center,
    turn_gae,
    value_loss,
    weight_stats,
    whiten,
    zero_variance_fraction,
)
from rspo_kit.algos.grpo import broadcast_to_steps
from rspo_kit.algos.offpolicy import OffPolicy
from rspo_kit.policy.rollout import Policy, Trajectory
from rspo_kit.policy.step_scores import old_unit_logprobs, prompt_states, score_steps, step_tokens
from rspo_kit.timing import timer
from rspo_kit.train.config import AlgoConfig

# opens the frozen reference policy for the KL penalty, e.g. ``ActorExplorer.reference``: with LoRA the
# base with the adapters off, only while the block runs (so the actor's own passes keep theirs)
Reference = Callable[[], AbstractContextManager[Policy]]


class ValueHead(torch.nn.Module):
    """PPO's critic: a small MLP on the policy trunk's last prompt state (detached).

    Why on the trunk and not a separate model: the prompt forward pass already runs for the policy
    loss, so the critic costs no extra model pass on CPU (trl's value-head models make the same
    choice). Why detached: a 1M-parameter policy is easily disturbed by value-loss gradients; the
    critic is a probe of the policy's features and the policy gradient alone shapes the trunk.
    """

    def __init__(self, hidden: int, width: int = 64):
        super().__init__()
        self.net = torch.nn.Sequential(
            torch.nn.Linear(hidden, width), torch.nn.Tanh(), torch.nn.Linear(width, 1)
        )

    def forward(self, states: torch.Tensor) -> torch.Tensor:  # (S, H) -> (S,)
        return self.net(states.detach().float()).squeeze(-1)


@dataclass
class Learner:
    """One role's trainable state: its policy, optimizer, and (PPO) critic with its optimizer."""

    policy: Policy
    params: list[torch.nn.Parameter]
    optimizer: torch.optim.Optimizer
    value_head: ValueHead | None = None
    value_optimizer: torch.optim.Optimizer | None = None

    @classmethod
    def build(
        cls, policy: Policy, params, lr: float, critic: bool, value_lr: float, seed: int = 0
    ) -> Learner:
        """``seed`` initialises the critic (PPO) without touching torch's global random state."""
        params = list(params)
        opt = torch.optim.AdamW(params, lr=lr, weight_decay=0.0)
        if not critic:
            return cls(policy, params, opt)
        with torch.random.fork_rng(devices=[]):
            torch.manual_seed(seed)
            head = ValueHead(policy.model.config.hidden_size)
        return cls(policy, params, opt, head, torch.optim.AdamW(head.parameters(), lr=value_lr))


@dataclass
class UpdateBatch:
    trajs: list[Trajectory]
    rewards: list[list[float]]  # per trajectory, per step: the signal this update optimises
    offpolicy: list[bool] = field(default_factory=list)  # per trajectory: replayed (behaviour = explorer)
    # per trajectory: the advantage per step stored with a replayed trajectory (RSPO's A_off, computed in
    # its own collection group under the outcome), which replaces X's estimate for it; None: X's estimate
    stored_advantages: list[list[float] | None] = field(default_factory=list)
    # set by ``update``: the advantage it optimised at each step (S,), flat in trajectory order, and the
    # AlgoConfig it ran; for PPO the whitened GAE over the critic's values at update time, which no viewer
    # can recompute afterwards
    advantages: torch.Tensor | None = field(default=None, init=False, repr=False)
    advantages_cfg: AlgoConfig | None = field(default=None, init=False, repr=False)
    # set by ``update``: per step (flat), the centre of each unit's clip window: 1 for on-policy units,
    # GePPO's π_old/π_B for replayed units under the shifted clip (where the window sat)
    clip_centers: list[torch.Tensor] | None = field(default=None, init=False, repr=False)

    def __post_init__(self) -> None:
        if not self.offpolicy:
            self.offpolicy = [False] * len(self.trajs)
        if not self.stored_advantages:
            self.stored_advantages = [None] * len(self.trajs)
        n = len(self.trajs)
        if len(self.rewards) != n or len(self.offpolicy) != n or len(self.stored_advantages) != n:
            raise ValueError(
                "UpdateBatch: trajs, rewards, offpolicy and stored_advantages must have one entry per trajectory"
            )
        for t, r, a in zip(self.trajs, self.rewards, self.stored_advantages, strict=True):
            if len(r) != len(t.steps):
                raise ValueError(f"trajectory {t.group_id} has {len(t.steps)} steps but {len(r)} rewards")
            if a is not None and len(a) != len(t.steps):
                raise ValueError(
                    f"trajectory {t.group_id} has {len(t.steps)} steps but {len(a)} stored advantages"
                )


@dataclass
class Flat:
    """The batch flattened to steps (S) over trajectories (N)."""

    steps: list
    step_traj: torch.Tensor  # (S,) trajectory index
    step_rewards: torch.Tensor  # (S,)
    traj_group: torch.Tensor  # (N,) task-group id
    traj_return: torch.Tensor  # (N,) Σ_t r_t
    anchor: torch.Tensor  # (S,) dense anchor ids
    offpolicy: torch.Tensor  # (S,) bool
    stored: torch.Tensor  # (S,) the stored advantage of a step (NaN: none stored, X estimates it)


def flatten(batch: UpdateBatch) -> Flat:
    groups: dict[str, int] = {}
    anchors: dict[str, int] = {}
    steps, step_traj, rewards, anchor, off, stored = [], [], [], [], [], []
    for i, (t, r) in enumerate(zip(batch.trajs, batch.rewards, strict=True)):
        groups.setdefault(t.group_id, len(groups))
        kept = batch.stored_advantages[i]
        for j, (s, reward) in enumerate(zip(t.steps, r, strict=True)):
            steps.append(s)
            step_traj.append(i)
            rewards.append(reward)
            anchor.append(anchors.setdefault(s.anchor, len(anchors)))
            off.append(batch.offpolicy[i])
            stored.append(math.nan if kept is None else kept[j])
    return Flat(
        steps,
        torch.tensor(step_traj, dtype=torch.long),
        torch.tensor(rewards, dtype=torch.float32),
        torch.tensor([groups[t.group_id] for t in batch.trajs], dtype=torch.long),
        torch.tensor([sum(r) for r in batch.rewards], dtype=torch.float32),
        torch.tensor(anchor, dtype=torch.long),
        torch.tensor(off, dtype=torch.bool),
        torch.tensor(stored, dtype=torch.float32),
    )


@dataclass
class Advantages:
    step: torch.Tensor  # (S,)
    returns: torch.Tensor | None = None  # (S,) critic targets (PPO)
    metrics: dict[str, float] = field(default_factory=dict)


def _grpo(flat: Flat, cfg: AlgoConfig, values: torch.Tensor | None) -> Advantages:
    traj_adv = grpo_advantages(flat.traj_return, flat.traj_group, use_std=cfg.divide_by_std)
    return Advantages(broadcast_to_steps(traj_adv, flat.step_traj))


def _gigpo(flat: Flat, cfg: AlgoConfig, values: torch.Tensor | None) -> Advantages:
    adv = gigpo_advantages(
        flat.traj_return,
        flat.traj_group,
        flat.step_rewards,
        flat.step_traj,
        flat.anchor,
        gamma=cfg.gamma,
        omega=cfg.omega,
        use_std=cfg.divide_by_std,
        episode_stats=cfg.episode_stats,
    )
    shared = (adv.step_group_size > 1).float().mean()
    return Advantages(
        adv.total,
        metrics={
            "adv/episode_abs_mean": float(adv.episode.abs().mean()),
            "adv/step_abs_mean": float(adv.step.abs().mean()),
            "adv/anchor_shared_steps": float(shared),  # steps whose anchor group has > 1 member
        },
    )


def _ppo(flat: Flat, cfg: AlgoConfig, values: torch.Tensor | None) -> Advantages:
    assert values is not None, "PPO needs the critic's values"
    adv, returns = turn_gae(flat.step_rewards, values, flat.step_traj, cfg.gamma, cfg.lam)
    return Advantages(whiten(adv), returns)


ADVANTAGES: dict[str, Callable[[Flat, AlgoConfig, torch.Tensor | None], Advantages]] = {
    "grpo": _grpo,
    "gigpo": _gigpo,
    "ppo": _ppo,
}


def batch_advantages(batch: UpdateBatch, cfg: AlgoConfig, values: torch.Tensor | None = None) -> Advantages:
    """The advantages X assigns to each step of a batch (flat, in trajectory order); for viewers.

    PPO needs the critic's values (S,); without them it uses 0, i.e. discounted returns-to-go. A batch
    that went through ``update`` carries the advantages the update used (``batch.advantages``).
    """
    flat = flatten(batch)
    if cfg.name == "ppo" and values is None:
        values = torch.zeros(len(flat.steps))
    return _with_stored(ADVANTAGES[cfg.name](flat, cfg, values), flat)


def _with_stored(adv: Advantages, flat: Flat) -> Advantages:
    """X's advantages with every stored one (a replayed trajectory's A_off) in place of X's estimate."""
    kept = ~torch.isnan(flat.stored)
    if bool(kept.any()):
        adv.step = torch.where(kept, flat.stored.to(adv.step.dtype), adv.step)
    return adv


def _chunks(n: int, size: int) -> list[range]:
    return [range(i, min(n, i + size)) for i in range(0, n, size)]


def minibatch_split(order: list[int], size: int) -> list[list[int]]:
    """``order`` (step indices) in round(n / ``size``) minibatches, at least one, sizes within one step.

    Each minibatch is one optimizer step, and Adam's step has about the same size whatever the number
    of steps its gradient averages. Cut into chunks of ``size``, a batch a few steps over a multiple of
    ``size`` (an actor batch of 256 steps plus one replayed trajectory of 7: 64, 64, 64, 64, 7) would
    take a whole extra step on the noisy gradient of those few steps, or on Adam's momentum alone where
    their advantages are 0; on the chain testbed (lr 1e-3) that one step took the actor's share of
    ``listen`` from 66% to 80%. Split evenly, every step averages about ``size`` steps.

    >>> [len(m) for m in minibatch_split(list(range(263)), 64)]
    [66, 66, 66, 65]
    >>> [len(m) for m in minibatch_split(list(range(256)), 64)], minibatch_split([3, 1, 2], 64)
    ([64, 64, 64, 64], [[3, 1, 2]])
    """
    if not order:
        return []
    k = max(1, (len(order) + size // 2) // size)
    base, extra = divmod(len(order), k)  # the first ``extra`` minibatches take one step more
    return [order[i * base + min(i, extra) : (i + 1) * base + min(i + 1, extra)] for i in range(k)]


@torch.no_grad()
def _prepass(learner: Learner, flat: Flat, cfg: AlgoConfig, temperature: float):
    """Current log-probs of replayed steps and critic values of all steps (only what is needed).

    A step that needs only its value (an on-policy step of PPO) takes a prompt-only pass; a replayed
    step is scored, and its value read from the same pass.
    """
    need_values = learner.value_head is not None
    current: dict[int, torch.Tensor] = {}
    values = torch.zeros(len(flat.steps)) if need_values else None
    replayed = [i for i in range(len(flat.steps)) if flat.offpolicy[i]]
    for chunk in _chunks(len(replayed), cfg.minibatch_steps):
        sel = [replayed[j] for j in chunk]
        scores = score_steps(learner.policy, [flat.steps[i] for i in sel], temperature, hidden=need_values)
        for k, i in enumerate(sel):
            current[i] = scores.logp[k].detach().float()
        if need_values:
            values[torch.tensor(sel)] = learner.value_head(scores.hidden).float()
    if need_values:
        own = [i for i in range(len(flat.steps)) if not flat.offpolicy[i]]
        for chunk in _chunks(len(own), cfg.minibatch_steps):
            sel = [own[j] for j in chunk]
            states = prompt_states(learner.policy, [flat.steps[i] for i in sel])
            values[torch.tensor(sel)] = learner.value_head(states).float()
    if values is not None and not bool(torch.isfinite(values).all()):
        raise FloatingPointError(f"non-finite critic values ({int((~torch.isfinite(values)).sum())} steps)")
    return current, values


@dataclass
class Units:
    """Per step, per unit: the loss inputs that depend on where the step came from."""

    old: list[torch.Tensor]  # the log-probs the ratio is taken against
    weights: list[torch.Tensor]  # detached sample weights (off-policy correction, J's α weighting)
    shaped: list[torch.Tensor]  # bool: LUFFY's shaped objective in place of the clipped ratio
    center: list[torch.Tensor]  # the clip window's centre (1; GePPO's π_old/π_B for shifted units)
    correction: list[torch.Tensor]  # the off-policy correction's own weights, before J's α weighting


def _share_weights(flat: Flat, units_per_step: list[int], offpolicy: OffPolicy) -> tuple[float, float]:
    """The factors on on- and off-policy units that make one token mean over the batch equal
    (1 − α)·J_on + α·J_off, each a token mean (the paper's Eq. 1; ``swap.offpolicy_weighting =
    "explicit"`` in its loop: ``offpolicy.share`` is α); (1, 1) otherwise, or where the batch lacks
    either part."""
    if offpolicy.share is None:
        return 1.0, 1.0
    off = sum(n for n, o in zip(units_per_step, flat.offpolicy.tolist(), strict=True) if o)
    total = sum(units_per_step)
    if off == 0 or off == total:
        return 1.0, 1.0
    alpha = offpolicy.share
    return (1 - alpha) * total / (total - off), alpha * total / off


def _unit_tensors(flat: Flat, current: dict, mode: str, offpolicy: OffPolicy) -> Units:
    """Per step: the ratio's denominator, the weights, the LUFFY flags and the clip centres (units).

    On-policy steps compare against their behaviour log-probs with weight 1 and centre 1. Replayed
    steps under ``shifted`` compare against their behaviour log-probs (π_B) with the window centred at
    π_old/π_B, π_old the actor at the start of the update (GePPO; the paper's Eq. 4); under the other
    corrections against π_old, weighted by min(π_old/π_B, c) (``truncated_is``), 1 (``none``), or shaped
    by f(π) = π/(π+0.1) (``luffy``). J's α weighting multiplies the weights (``_share_weights``).
    """
    units = Units([], [], [], [], [])
    clip = offpolicy.clip
    for i, s in enumerate(flat.steps):
        behaviour = torch.tensor(old_unit_logprobs(s, mode), dtype=torch.float32)
        if flat.offpolicy[i]:
            now = current[i]
            shifted = clip == "shifted"
            units.old.append(behaviour if shifted else now)
            units.weights.append(offpolicy_weights(now, behaviour, clip, offpolicy.is_clip))
            units.shaped.append(torch.full_like(now, clip == "luffy", dtype=torch.bool))
            units.center.append(shifted_center(now, behaviour) if shifted else torch.ones_like(now))
        else:
            units.old.append(behaviour)
            units.weights.append(torch.ones_like(behaviour))
            units.shaped.append(torch.zeros_like(behaviour, dtype=torch.bool))
            units.center.append(torch.ones_like(behaviour))
    units.correction = units.weights
    on, off = _share_weights(flat, [len(o) for o in units.old], offpolicy)
    if (on, off) != (1.0, 1.0):
        units.weights = [w * (off if flat.offpolicy[i] else on) for i, w in enumerate(units.weights)]
    return units


def _prepare(
    learner: Learner,
    flat: Flat,
    cfg: AlgoConfig,
    offpolicy: OffPolicy,
    temperature: float,
    clock: dict[str, float] | None = None,
):
    """Steps 2-3 of the recipe: the pre-pass, the advantages, and the per-unit loss inputs.

    ``clock``, if given, receives the seconds of the pre-pass (model) and of the rest (bookkeeping).
    """
    clock = {} if clock is None else clock
    with timer(clock, "perf/update_prepass_s"):
        learner.policy.model.eval()  # no dropout in the tiny presets; keeps pre-pass and loss consistent
        current, values = _prepass(learner, flat, cfg, temperature)
    with timer(clock, "perf/update_advantages_s"):
        adv = _with_stored(ADVANTAGES[cfg.name](flat, cfg, values), flat)
        if not torch.isfinite(adv.step).all():
            raise FloatingPointError(f"non-finite advantages in the {cfg.name} update")
        if adv.returns is not None and not torch.isfinite(adv.returns).all():
            raise FloatingPointError(f"non-finite critic targets (returns) in the {cfg.name} update")
        units = _unit_tensors(flat, current, learner.policy.mode, offpolicy)
    return values, adv, units


def update(
    learner: Learner,
    batch: UpdateBatch,
    cfg: AlgoConfig,
    offpolicy: OffPolicy | None = None,
    *,
    temperature: float = 1.0,
    seed: int = 0,
    reference: Reference | None = None,
) -> dict[str, float]:
    """One X-update of ``learner`` on ``batch``; returns ``loss/*``, ``adv/*`` (and ``is/*``) metrics.

    ``offpolicy`` is how replayed steps enter the objective (a run's ``swap.offpolicy``; None: GePPO's
    shifted clip, one token mean over the batch); ``temperature`` is the one the log-probs are scored
    at, ``seed`` orders the minibatches.

    ``reference`` opens the frozen reference policy that ``cfg.kl_coef`` > 0 penalises the KL to
    (``loss/kl_ref``); with ``kl_coef`` = 0 it is never opened.
    """
    if cfg.kl_coef > 0 and reference is None:
        raise ValueError(f"algo.kl_coef = {cfg.kl_coef} needs the reference policy (update(reference=...))")
    clock: dict[str, float] = {}
    with timer(clock, "perf/update_flatten_s"):
        flat = flatten(batch)
    if not flat.steps:
        return {}
    offpolicy = offpolicy or OffPolicy()
    values, adv, units = _prepare(learner, flat, cfg, offpolicy, temperature, clock)
    batch.advantages, batch.advantages_cfg = adv.step.detach().clone(), cfg
    batch.clip_centers = units.center

    generator = torch.Generator().manual_seed(seed)
    sums: dict[str, list[float]] = {}
    with timer(clock, "perf/update_minibatch_s"):
        for _epoch in range(cfg.epochs):
            order = torch.randperm(len(flat.steps), generator=generator).tolist()
            for sel in minibatch_split(order, cfg.minibatch_steps):
                m = _minibatch_loss(learner, flat, adv, sel, units, cfg, temperature, values, reference)
                for k, v in m.items():
                    sums.setdefault(k, []).append(v)

    metrics = {k: sum(v) / len(v) for k, v in sums.items()} | clock
    metrics |= adv.metrics
    metrics["adv/mean"] = float(adv.step.mean())
    metrics["adv/abs_mean"] = float(adv.step.abs().mean())
    metrics["adv/zero_var_groups"] = float(zero_variance_fraction(flat.traj_return, flat.traj_group))
    metrics["update/steps"] = float(len(flat.steps))
    if flat.offpolicy.any():
        w = torch.cat([units.correction[i] for i in range(len(flat.steps)) if flat.offpolicy[i]])
        metrics |= {f"is/{k}": v for k, v in weight_stats(w, offpolicy.is_clip).items()}
    if values is not None and adv.returns is not None:
        metrics["value/explained_variance"] = float(explained_variance(values, adv.returns))
    return metrics


def _surrogate(learner, flat, adv, sel, units: Units, cfg, temperature, hidden=False):
    """The clipped surrogate over the units of steps ``sel``; returns (loss output, scores, unit log-probs)."""
    scores = score_steps(learner.policy, [flat.steps[i] for i in sel], temperature, hidden=hidden)
    logp = torch.cat(scores.logp).float()  # (U,) units of the selected steps
    seq = torch.repeat_interleave(torch.arange(len(sel)), torch.tensor([len(x) for x in scores.logp]))
    out = clipped_policy_loss(
        logp,
        torch.cat([units.old[i] for i in sel]),
        adv.step[torch.tensor(sel)][seq].float(),
        torch.ones_like(logp, dtype=torch.bool),
        clip_low=cfg.clip_low,
        clip_high=cfg.clip_high,
        weights=torch.cat([units.weights[i] for i in sel]),
        shaped=torch.cat([units.shaped[i] for i in sel]),
        seq=seq,
        clip_center=torch.cat([units.center[i] for i in sel]),
    )
    return out, scores, logp


def microbatches(steps: list, sel: list[int], size: int) -> list[list[int]]:
    """``sel`` (step indices) in passes of at most ``size`` steps, steps of similar length together.

    Sorting by length keeps each pass's padding small; the passes together hold every step of
    ``sel`` once, so gradients accumulated over them are the minibatch's own.

    >>> from types import SimpleNamespace as S
    >>> steps = [S(prompt_ids=[0] * n, candidates=None, action_ids=[0]) for n in (5, 1, 9, 3)]
    >>> microbatches(steps, [0, 1, 2, 3], 2)
    [[1, 3], [0, 2]]
    """
    order = sorted(sel, key=lambda i: step_tokens(steps[i]))
    return [order[i : i + size] for i in range(0, len(order), size)]


def _passes(flat: Flat, sel: list[int], size: int) -> tuple[list[list[int]], int]:
    """The minibatch ``sel`` in passes (``microbatches``): replayed steps' passes first, then the
    on-policy ones; returns the passes and how many of them are replayed steps'."""
    off = [i for i in sel if flat.offpolicy[i]]
    if not off:
        return microbatches(flat.steps, sel, size), 0
    first = microbatches(flat.steps, off, size)
    return first + microbatches(flat.steps, [i for i in sel if not flat.offpolicy[i]], size), len(first)


def _grads(params: list[torch.nn.Parameter]) -> list[torch.Tensor | None]:
    return [None if p.grad is None else p.grad.detach().clone() for p in params]


def _grad_share(params: list[torch.nn.Parameter], off: list[torch.Tensor | None]) -> float:
    """||g_off|| / (||g_off|| + ||g_on||): the replayed steps' share of the minibatch's gradient, with
    g_on = g − g_off (NaN where both are 0)."""
    off_sq = on_sq = 0.0
    for p, g_off in zip(params, off, strict=True):
        g = p.grad
        if g_off is not None:
            off_sq += float(g_off.double().pow(2).sum())
        if g is not None:
            on_sq += float((g - (g_off if g_off is not None else 0)).double().pow(2).sum())
    total = math.sqrt(off_sq) + math.sqrt(on_sq)
    return math.sqrt(off_sq) / total if total > 0 else math.nan


def _backward(learner, flat, adv, sel, units: Units, cfg, temperature, reference):
    """The minibatch ``sel``'s loss, backpropagated pass by pass into fresh ``.grad``s.

    Every term of the loss is a mean over the minibatch's units (token_mean), so a pass of n of the
    N units backpropagates its own mean times n / N, and the passes' gradients sum to the one-pass
    gradient (``policy_gradient``). Metrics are combined with the same weights (approx KL and clip
    fraction over unshaped units, as in ``clipped_policy_loss``). Replayed steps go first, so that
    their share of the gradient is read between the passes (``offpolicy/grad_share``), with their clip
    fraction (``offpolicy/clip_frac``). Returns the metrics, the passes' step order and their detached
    last-prompt states (PPO's critic; None without a critic).
    """
    critic = learner.value_head is not None
    learner.optimizer.zero_grad(set_to_none=True)
    total = sum(len(units.old[i]) for i in sel)
    unshaped_total = max(1, sum(int((~units.shaped[i]).sum()) for i in sel))
    off_total = sum(len(units.old[i]) for i in sel if flat.offpolicy[i])
    sums: dict[str, float] = {}
    order, hidden = [], []
    passes, n_off = _passes(flat, sel, cfg.microbatch_steps)
    g_off = None
    for n, part in enumerate(passes):
        if n == n_off and n_off:
            g_off = _grads(learner.params)
        out, scores, logp = _surrogate(learner, flat, adv, part, units, cfg, temperature, critic)
        share = len(logp) / total
        unshaped = sum(int((~units.shaped[i]).sum()) for i in part) / unshaped_total
        entropy = torch.cat(scores.entropy).float().mean()
        loss = out.loss - cfg.entropy_coef * entropy
        terms = {
            "loss/policy": (float(out.loss.detach()), share),
            "loss/approx_kl": (float(out.approx_kl), unshaped),
            "loss/clip_frac": (float(out.clip_frac), unshaped),
            "loss/entropy": (float(entropy.detach()), share),
        }
        if n < n_off:  # a pass of replayed steps only
            terms["offpolicy/clip_frac"] = (float(out.clipped.float().mean()), len(logp) / off_total)
        if cfg.kl_coef > 0 and reference is not None:
            with torch.no_grad(), reference() as frozen:
                ref = torch.cat(score_steps(frozen, [flat.steps[i] for i in part], temperature).logp).float()
            kl = kl_penalty(logp, ref).mean()
            loss = loss + cfg.kl_coef * kl
            terms["loss/kl_ref"] = (float(kl.detach()), share)
        if not torch.isfinite(loss):
            raise FloatingPointError(f"non-finite policy loss ({float(loss)}) in the {cfg.name} update")
        (loss * share).backward()
        for k, (value, weight) in terms.items():
            sums[k] = sums.get(k, 0.0) + value * weight
        order += part
        if critic:
            hidden.append(scores.hidden.detach())
    if n_off:
        if g_off is None:  # every step of the minibatch was replayed
            g_off = _grads(learner.params)
        sums["offpolicy/grad_share"] = _grad_share(learner.params, g_off)
    return sums, order, (torch.cat(hidden) if critic else None)


def _check_finite(params: list[torch.Tensor], what: str) -> None:
    """Parameters after an optimizer step are finite, or FloatingPointError: a finite gradient times a
    huge learning rate can still overflow them."""
    if not bool(torch.stack([torch.isfinite(p).all() for p in params]).all()):
        raise FloatingPointError(f"non-finite parameters after a step of {what}")


def _minibatch_loss(learner, flat, adv, sel, units: Units, cfg, temperature, values, reference):
    metrics, order, hidden = _backward(learner, flat, adv, sel, units, cfg, temperature, reference)
    grad_norm = torch.nn.utils.clip_grad_norm_(learner.params, cfg.max_grad_norm)
    if not bool(torch.isfinite(grad_norm)):  # a finite loss can still have NaN gradients (overflow)
        learner.optimizer.zero_grad(set_to_none=True)
        raise FloatingPointError(
            f"non-finite gradient norm ({float(grad_norm)}) in the {cfg.name} update; the step was not taken"
        )
    # A zero gradient (every advantage 0, or every unit clipped) takes no step: Adam would move the
    # policy on its momentum alone, i.e. on earlier minibatches' data, where this one says stay.
    if float(grad_norm) > 0:
        learner.optimizer.step()
        _check_finite(learner.params, f"the {cfg.name} update")
    metrics["loss/grad_norm"] = float(grad_norm)
    if hidden is not None:
        idx = torch.tensor(order)
        v = learner.value_head(hidden)
        vloss = cfg.value_coef * value_loss(
            v, values[idx], adv.returns[idx].float(), torch.ones_like(v), cfg.value_clip
        )
        if not bool(torch.isfinite(vloss)):
            raise FloatingPointError(
                f"non-finite critic loss ({float(vloss)}); the critic's step was not taken"
            )
        learner.value_optimizer.zero_grad(set_to_none=True)
        vloss.backward()
        learner.value_optimizer.step()
        _check_finite(list(learner.value_head.parameters()), "the critic")
        metrics["loss/value"] = float(vloss.detach())
    return metrics


def policy_gradient(
    learner: Learner,
    batch: UpdateBatch,
    cfg: AlgoConfig,
    offpolicy: OffPolicy | None = None,
    *,
    temperature: float = 1.0,
) -> list[torch.Tensor]:
    """The policy-loss gradient over the whole batch in one pass, without stepping (the swap test)."""
    flat = flatten(batch)
    _, adv, units = _prepare(learner, flat, cfg, offpolicy or OffPolicy(), temperature)
    every_step = list(range(len(flat.steps)))
    out, _, _ = _surrogate(learner, flat, adv, every_step, units, cfg, temperature)
    return list(torch.autograd.grad(out.loss, learner.params, allow_unused=True))

"""rspo_kit.algos against slow pure-Python loop references, plus the properties the math promises.

Each vectorised function has a ``ref_*`` twin written as the plain per-sample loop a reader
would write from the paper; hypothesis compares the two on random groups (singletons included),
anchors with collisions and trajectories of varied length, contiguous or interleaved.
"""

from __future__ import annotations

import doctest
import importlib
import math
import statistics
from collections import defaultdict

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from rspo_kit.algos import (
    broadcast_to_steps,
    categorical_entropy,
    clipped_policy_loss,
    discounted_returns,
    entropy_from_logits,
    explained_variance,
    gigpo_advantages,
    group_stats,
    grpo_advantages,
    kl_penalty,
    offpolicy_weights,
    turn_gae,
    value_loss,
    weight_stats,
    whiten,
    zero_variance_fraction,
)

EXAMPLES = settings(max_examples=60, deadline=None)
F64 = torch.float64

# Ties (integers) make zero-variance groups likely; floats exercise the general case.
REWARD = st.one_of(st.integers(-2, 2).map(float), st.floats(-10, 10, allow_nan=False, allow_subnormal=False))


def t64(values) -> torch.Tensor:
    return torch.tensor(values, dtype=F64)


def tlong(values) -> torch.Tensor:
    return torch.tensor(values, dtype=torch.long)


def close(actual: torch.Tensor, expected, tol: float = 1e-9) -> None:
    torch.testing.assert_close(actual, torch.as_tensor(expected, dtype=actual.dtype), rtol=tol, atol=tol)


def gigpo_of(b: dict, anchor: torch.Tensor | None = None, **kwargs):
    """``gigpo_advantages`` on a ``trajectory_batch``, with its own anchors unless ``anchor`` is given."""
    anchor = tlong(b["anchor"]) if anchor is None else anchor
    return gigpo_advantages(
        t64(b["episode_returns"]),
        tlong(b["group"]),
        t64(b["step_rewards"]),
        tlong(b["step_traj"]),
        anchor,
        **kwargs,
    )


# ---------------------------------------------------------------- strategies


@st.composite
def grouped_rewards(draw, max_groups: int = 6, max_size: int = 5):
    """(rewards, group): groups of 1..max_size members with arbitrary distinct labels, shuffled."""
    sizes = draw(st.lists(st.integers(1, max_size), min_size=1, max_size=max_groups))
    labels = draw(st.lists(st.integers(-1000, 1000), min_size=len(sizes), max_size=len(sizes), unique=True))
    group = [label for label, size in zip(labels, sizes, strict=True) for _ in range(size)]
    rewards = draw(st.lists(REWARD, min_size=len(group), max_size=len(group)))
    order = draw(st.permutations(range(len(group))))
    return [rewards[i] for i in order], [group[i] for i in order]


@st.composite
def trajectory_batch(draw, max_traj: int = 8, max_len: int = 10, n_anchors: int = 4):
    """A GiGPO batch: trajectories in task groups (singletons likely), steps with colliding anchors.

    ``step_traj`` lists the steps either as contiguous blocks or interleaved; either way the k-th
    occurrence of trajectory i is its k-th step.
    """
    n_traj = draw(st.integers(1, max_traj))
    group = draw(st.lists(st.integers(0, 3), min_size=n_traj, max_size=n_traj))
    lengths = draw(st.lists(st.integers(1, max_len), min_size=n_traj, max_size=n_traj))
    step_traj = [i for i, length in enumerate(lengths) for _ in range(length)]
    if draw(st.booleans()):
        step_traj = list(draw(st.permutations(step_traj)))
    n_steps = len(step_traj)
    return {
        "episode_returns": draw(st.lists(REWARD, min_size=n_traj, max_size=n_traj)),
        "group": group,
        "step_rewards": draw(st.lists(REWARD, min_size=n_steps, max_size=n_steps)),
        "step_traj": step_traj,
        "anchor": draw(st.lists(st.integers(0, n_anchors - 1), min_size=n_steps, max_size=n_steps)),
    }


# ---------------------------------------------------------------- loop references


def ref_group_stats(values, group):
    members = defaultdict(list)
    for value, g in zip(values, group, strict=True):
        members[g].append(value)
    mean = {g: statistics.fmean(vs) for g, vs in members.items()}
    std = {g: statistics.stdev(vs) if len(vs) > 1 else 0.0 for g, vs in members.items()}
    count = {g: len(vs) for g, vs in members.items()}
    return [mean[g] for g in group], [std[g] for g in group], [count[g] for g in group]


def ref_grpo(rewards, group, use_std=True, eps=1e-6):
    mean, std, _ = ref_group_stats(rewards, group)
    out = []
    for r, m, s in zip(rewards, mean, std, strict=True):
        out.append((r - m) / (s + eps) if use_std else r - m)
    return out


def ref_steps_of(step_traj) -> dict[int, list[int]]:
    """Each trajectory's step indices, in order."""
    steps_of = defaultdict(list)
    for s, traj in enumerate(step_traj):
        steps_of[traj].append(s)
    return steps_of


def ref_discounted_returns(step_rewards, step_traj, gamma):
    out = [0.0] * len(step_rewards)
    for steps in ref_steps_of(step_traj).values():
        running = 0.0
        for s in reversed(steps):
            running = step_rewards[s] + gamma * running
            out[s] = running
    return out


def ref_gigpo(b, gamma, omega, use_std, episode_stats, eps=1e-6):
    traj_of = b["step_traj"]
    if episode_stats == "trajectories":
        per_traj = ref_grpo(b["episode_returns"], b["group"], use_std, eps)
        episode = [per_traj[i] for i in traj_of]
    else:
        episode = ref_grpo(
            [b["episode_returns"][i] for i in traj_of], [b["group"][i] for i in traj_of], use_std, eps
        )
    returns = ref_discounted_returns(b["step_rewards"], traj_of, gamma)
    keys = [(b["group"][i], a) for i, a in zip(traj_of, b["anchor"], strict=True)]
    step = ref_grpo(returns, keys, use_std, eps)
    total = [e + omega * s for e, s in zip(episode, step, strict=True)]
    sizes = [keys.count(k) for k in keys]
    return episode, step, total, keys, sizes


def ref_turn_gae(rewards, values, step_traj, gamma, lam):
    """cleanrl's lastgaelam loop, one trajectory at a time; the last turn is terminal."""
    advantages = [0.0] * len(rewards)
    for steps in ref_steps_of(step_traj).values():
        lastgaelam = 0.0
        for k in reversed(range(len(steps))):
            next_value = values[steps[k + 1]] if k + 1 < len(steps) else 0.0
            delta = rewards[steps[k]] + gamma * next_value - values[steps[k]]
            lastgaelam = delta + gamma * lam * lastgaelam
            advantages[steps[k]] = lastgaelam
    return advantages, [a + v for a, v in zip(advantages, values, strict=True)]


def ref_policy_loss(logp, old, adv, mask, clip_low, clip_high, weights, shaped, gamma, aggregation, seq):
    high = clip_low if clip_high is None else clip_high
    losses, kls, clipped, ratios, ppo_mask = [], [], [], [], []
    for i in range(len(logp)):
        if shaped[i]:
            pi = math.exp(logp[i])
            losses.append(-adv[i] * weights[i] * pi / (pi + gamma))
            kls.append(0.0)
            clipped.append(0.0)
            ratios.append(1.0)
            ppo_mask.append(0.0)
            continue
        ratio = math.exp(logp[i] - old[i])
        clamped = min(max(ratio, 1 - clip_low), 1 + high)
        losses.append(weights[i] * max(-adv[i] * ratio, -adv[i] * clamped))
        kls.append((ratio - 1) - math.log(ratio))
        clipped.append(1.0 if -adv[i] * clamped > -adv[i] * ratio else 0.0)
        ratios.append(ratio)
        ppo_mask.append(mask[i])
    if aggregation == "token_mean":
        loss = sum(x * m for x, m in zip(losses, mask, strict=True)) / max(sum(mask), 1)
    else:
        per_seq = defaultdict(lambda: [0.0, 0.0])
        for x, m, s in zip(losses, mask, seq, strict=True):
            per_seq[s][0] += x * m
            per_seq[s][1] += m
        means = [num / den for num, den in per_seq.values() if den > 0]
        loss = sum(means) / max(len(means), 1)
    n = max(sum(ppo_mask), 1)
    return (
        loss,
        sum(k * m for k, m in zip(kls, ppo_mask, strict=True)) / n,
        sum(c * m for c, m in zip(clipped, ppo_mask, strict=True)) / n,
        sum(r * m for r, m in zip(ratios, ppo_mask, strict=True)) / n,
    )


# ---------------------------------------------------------------- GRPO


@EXAMPLES
@given(grouped_rewards())
def test_group_stats_matches_loop(data):
    rewards, group = data
    mean, std, count = group_stats(t64(rewards), tlong(group))
    ref_mean, ref_std, ref_count = ref_group_stats(rewards, group)
    close(mean, ref_mean)
    close(std, ref_std)
    assert count.tolist() == ref_count


@EXAMPLES
@given(grouped_rewards(), st.booleans())
def test_grpo_matches_loop(data, use_std):
    rewards, group = data
    close(
        grpo_advantages(t64(rewards), tlong(group), use_std=use_std), ref_grpo(rewards, group, use_std), 1e-7
    )


@EXAMPLES
@given(grouped_rewards(), st.booleans())
def test_grpo_sums_to_zero_in_each_group(data, use_std):
    rewards, group = data
    advantages = grpo_advantages(t64(rewards), tlong(group), use_std=use_std)
    dense = torch.unique(tlong(group), return_inverse=True)[1]
    sums = torch.zeros(int(dense.max()) + 1, dtype=F64).index_add_(0, dense, advantages)
    close(sums, torch.zeros_like(sums), 1e-8)


@EXAMPLES
@given(grouped_rewards(), st.booleans())
def test_grpo_singleton_group_gets_zero(data, use_std):
    rewards, group = data
    advantages = grpo_advantages(t64(rewards), tlong(group), use_std=use_std)
    for i, g in enumerate(group):
        if group.count(g) == 1:
            assert advantages[i].item() == 0.0


@EXAMPLES
@given(grouped_rewards(), st.integers(2, 50), st.integers(-(10**6), 10**6))
def test_grpo_invariant_to_relabelling_groups(data, scale, shift):
    rewards, group = data
    relabelled = [scale * g + shift for g in group]  # injective, and reorders the labels when shift < 0
    before = grpo_advantages(t64(rewards), tlong(group))
    after = grpo_advantages(t64(rewards), tlong(relabelled))
    assert torch.equal(before, after)


def test_grpo_returns_input_dtype_and_handles_zero_variance():
    rewards = torch.tensor([1.0, 1.0, 1.0, 0.0], dtype=torch.float32)
    advantages = grpo_advantages(rewards, tlong([3, 3, 3, 8]))
    assert advantages.dtype == torch.float32
    assert advantages.tolist() == [0.0, 0.0, 0.0, 0.0]


def test_broadcast_to_steps():
    close(broadcast_to_steps(t64([0.5, -1.0]), tlong([0, 0, 1, 0, 1])), [0.5, 0.5, -1.0, 0.5, -1.0])


@EXAMPLES
@given(grouped_rewards())
def test_zero_variance_fraction_matches_loop(data):
    rewards, group = data
    members = defaultdict(list)
    for r, g in zip(rewards, group, strict=True):
        members[g].append(r)
    expected = sum(len(set(vs)) == 1 for vs in members.values()) / len(members)
    close(zero_variance_fraction(t64(rewards), tlong(group)), expected)


# ---------------------------------------------------------------- GiGPO


@EXAMPLES
@given(trajectory_batch(), st.sampled_from([0.0, 0.5, 0.95, 1.0]))
def test_discounted_returns_matches_loop(b, gamma):
    returns = discounted_returns(t64(b["step_rewards"]), tlong(b["step_traj"]), gamma)
    close(returns, ref_discounted_returns(b["step_rewards"], b["step_traj"], gamma), 1e-9)


@settings(max_examples=20, deadline=None)
@given(
    st.lists(st.integers(1, 60), min_size=1, max_size=6),
    st.floats(0.5, 1.0),
    st.lists(st.floats(-1, 1, allow_nan=False), min_size=360, max_size=360),
)
def test_discounted_returns_stable_on_long_trajectories(lengths, gamma, pool):
    step_traj = [i for i, length in enumerate(lengths) for _ in range(length)]
    rewards = pool[: len(step_traj)]
    returns = discounted_returns(t64(rewards), tlong(step_traj), gamma)
    close(returns, ref_discounted_returns(rewards, step_traj, gamma), 1e-10)


def test_discounted_returns_sparse_outcome_and_dtype():
    rewards = torch.tensor([0.0, 0.0, 0.0, 1.0], dtype=torch.float32)
    returns = discounted_returns(rewards, tlong([4, 4, 4, 4]), gamma=0.5)
    assert returns.dtype == torch.float32
    assert returns.tolist() == [0.125, 0.25, 0.5, 1.0]


@EXAMPLES
@given(
    trajectory_batch(),
    st.sampled_from([0.5, 0.95, 1.0]),
    st.sampled_from([0.0, 0.5, 1.0]),
    st.booleans(),
    st.sampled_from(["trajectories", "steps"]),
)
def test_gigpo_matches_loop(b, gamma, omega, use_std, episode_stats):
    adv = gigpo_of(b, gamma=gamma, omega=omega, use_std=use_std, episode_stats=episode_stats)
    episode, step, total, keys, sizes = ref_gigpo(b, gamma, omega, use_std, episode_stats)
    close(adv.episode, episode, 1e-7)
    close(adv.step, step, 1e-7)
    close(adv.total, total, 1e-7)
    assert adv.step_group_size.tolist() == sizes
    # Same id exactly when same (task group, anchor).
    ids = adv.step_group.tolist()
    assert all((ids[s] == ids[u]) == (keys[s] == keys[u]) for s in range(len(ids)) for u in range(len(ids)))


@EXAMPLES
@given(trajectory_batch(), st.booleans())
def test_gigpo_distinct_anchors_reduce_to_grpo(b, use_std):
    adv = gigpo_of(b, anchor=torch.arange(len(b["step_traj"])), use_std=use_std)
    grpo = grpo_advantages(t64(b["episode_returns"]), tlong(b["group"]), use_std=use_std)
    assert torch.all(adv.step == 0)
    assert torch.all(adv.step_group_size == 1)
    close(adv.total, broadcast_to_steps(grpo, tlong(b["step_traj"])))


@EXAMPLES
@given(trajectory_batch(), st.booleans())
def test_gigpo_step_advantages_sum_to_zero_per_step_group(b, use_std):
    adv = gigpo_of(b, use_std=use_std)
    n_groups = int(adv.step_group.max()) + 1
    sums = torch.zeros(n_groups, dtype=F64).index_add_(0, adv.step_group, adv.step)
    close(sums, torch.zeros_like(sums), 1e-7)
    assert torch.all(adv.step[adv.step_group_size == 1] == 0)


def test_gigpo_anchor_groups_stay_within_task_groups():
    # Two tasks, each with one trajectory visiting anchor 7: no step group spans tasks.
    adv = gigpo_advantages(t64([1.0, 0.0]), tlong([0, 1]), t64([0.0, 1.0]), tlong([0, 1]), tlong([7, 7]))
    assert adv.step_group.tolist() == [0, 1]
    assert adv.step.tolist() == [0.0, 0.0]


def test_gigpo_steps_stats_weigh_long_trajectories_more():
    # Group of two: a 3-step success and a 1-step failure. Over trajectories mean = 0.5;
    # over steps mean = (1+1+1+0)/4 = 0.75.
    kwargs = {
        "episode_returns": t64([1.0, 0.0]),
        "group": tlong([0, 0]),
        "step_rewards": t64([0.0, 0.0, 1.0, 0.0]),
        "step_traj": tlong([0, 0, 0, 1]),
        "anchor": tlong([1, 2, 3, 4]),
    }
    by_traj = gigpo_advantages(**kwargs, episode_stats="trajectories")
    by_step = gigpo_advantages(**kwargs, episode_stats="steps")
    close(by_traj.episode, [0.5, 0.5, 0.5, -0.5])
    close(by_step.episode, [0.25, 0.25, 0.25, -0.75])


def test_gigpo_rejects_unknown_episode_stats():
    with pytest.raises(ValueError, match="episode_stats"):
        gigpo_advantages(t64([1.0]), tlong([0]), t64([1.0]), tlong([0]), tlong([0]), episode_stats="tokens")


# ---------------------------------------------------------------- GAE and whitening


@EXAMPLES
@given(
    trajectory_batch(),
    st.sampled_from([0.0, 0.9, 0.99, 1.0]),
    st.sampled_from([0.0, 0.5, 0.95, 1.0]),
    st.data(),
)
def test_turn_gae_matches_loop(b, gamma, lam, data):
    n_steps = len(b["step_traj"])
    values = data.draw(st.lists(st.floats(-5, 5, allow_nan=False), min_size=n_steps, max_size=n_steps))
    advantages, returns = turn_gae(t64(b["step_rewards"]), t64(values), tlong(b["step_traj"]), gamma, lam)
    ref_adv, ref_ret = ref_turn_gae(b["step_rewards"], values, b["step_traj"], gamma, lam)
    close(advantages, ref_adv, 1e-9)
    close(returns, ref_ret, 1e-9)


@EXAMPLES
@given(trajectory_batch(), st.floats(0.5, 1.0), st.data())
def test_turn_gae_lambda_one_gives_discounted_returns(b, gamma, data):
    n_steps = len(b["step_traj"])
    values = data.draw(st.lists(st.floats(-5, 5, allow_nan=False), min_size=n_steps, max_size=n_steps))
    _, returns = turn_gae(t64(b["step_rewards"]), t64(values), tlong(b["step_traj"]), gamma, lam=1.0)
    close(returns, discounted_returns(t64(b["step_rewards"]), tlong(b["step_traj"]), gamma), 1e-9)


def test_turn_gae_lambda_zero_is_one_step_td_and_detaches_values():
    values = torch.tensor([1.0, 2.0, 0.5], dtype=F64, requires_grad=True)
    advantages, returns = turn_gae(t64([0.0, 1.0, 3.0]), values, tlong([0, 0, 1]), gamma=0.5, lam=0.0)
    close(advantages, [0.0 + 0.5 * 2.0 - 1.0, 1.0 - 2.0, 3.0 - 0.5])
    assert not advantages.requires_grad and not returns.requires_grad


@EXAMPLES
@given(
    st.lists(st.floats(-100, 100, allow_nan=False), min_size=2, max_size=30),
    st.data(),
    st.booleans(),
)
def test_whiten_matches_loop(xs, data, shift_mean):
    mask = data.draw(st.lists(st.booleans(), min_size=len(xs), max_size=len(xs)))
    selected = [x for x, m in zip(xs, mask, strict=True) if m]
    if not selected:
        with pytest.raises(ValueError, match="no elements"):
            whiten(t64(xs), torch.tensor(mask))
        return
    mean = statistics.fmean(selected)
    var = statistics.variance(selected) if len(selected) > 1 else 0.0
    expected = [(x - mean) / math.sqrt(var + 1e-8) + (0.0 if shift_mean else mean) for x in xs]
    close(whiten(t64(xs), torch.tensor(mask), shift_mean=shift_mean), expected, 1e-7)


def test_whiten_keeps_dtype_and_standardises():
    x = torch.tensor([1.0, 5.0, 2.0, 8.0], dtype=torch.float32)
    white = whiten(x)
    assert white.dtype == torch.float32
    assert abs(white.mean().item()) < 1e-6 and abs(white.std().item() - 1.0) < 1e-4


# ---------------------------------------------------------------- policy loss


@st.composite
def policy_batch(draw, max_units: int = 12):
    n = draw(st.integers(1, max_units))
    logp = st.floats(-4, 0, allow_nan=False, allow_subnormal=False)

    def column(strategy):
        return draw(st.lists(strategy, min_size=n, max_size=n))

    return {
        "logp": column(logp),
        "old": column(logp),
        "adv": column(st.floats(-3, 3, allow_nan=False, allow_subnormal=False)),
        "mask": column(st.sampled_from([0.0, 1.0])),
        "weights": column(st.floats(0, 2, allow_nan=False, allow_subnormal=False)),
        "shaped": column(st.booleans()),
        "seq": column(st.integers(0, 3)),
    }


@EXAMPLES
@given(
    policy_batch(),
    st.sampled_from([0.1, 0.2]),
    st.sampled_from([None, 0.28]),
    st.booleans(),
    st.sampled_from(["token_mean", "seq_mean"]),
)
def test_clipped_policy_loss_matches_loop(b, clip_low, clip_high, use_shaping, aggregation):
    shaped = b["shaped"] if use_shaping else [False] * len(b["logp"])
    out = clipped_policy_loss(
        t64(b["logp"]),
        t64(b["old"]),
        t64(b["adv"]),
        t64(b["mask"]),
        clip_low=clip_low,
        clip_high=clip_high,
        weights=t64(b["weights"]),
        shaped=torch.tensor(shaped),
        aggregation=aggregation,
        seq=tlong(b["seq"]),
    )
    loss, kl, clip_frac, ratio_mean = ref_policy_loss(
        b["logp"], b["old"], b["adv"], b["mask"], clip_low, clip_high, b["weights"], shaped, 0.1,
        aggregation, b["seq"],
    )  # fmt: skip
    close(out.loss, loss, 1e-9)
    close(out.approx_kl, kl, 1e-9)
    close(out.clip_frac, clip_frac, 1e-12)
    close(out.ratio_mean, ratio_mean, 1e-9)
    for metric in (out.approx_kl, out.clip_frac, out.ratio_mean):
        assert not metric.requires_grad


def _loss_grad(logp, old, adv, **kwargs):
    logp = t64(logp).requires_grad_(True)
    out = clipped_policy_loss(logp, t64(old), t64(adv), torch.ones(len(adv), dtype=torch.bool), **kwargs)
    out.loss.backward()
    return logp.grad, out


def test_clipped_policy_loss_gradient_blocked_where_clipped_and_ratio_inside():
    ratios = [1.5, 0.5, 0.5, 1.5, 1.1, 0.9]
    adv = [1.0, -1.0, 1.0, -1.0, 2.0, -0.5]
    weights = [1.0, 1.0, 0.5, 2.0, 1.5, 1.0]
    old = [-1.0] * 6
    logp = [o + math.log(r) for o, r in zip(old, ratios, strict=True)]
    grad, out = _loss_grad(logp, old, adv, weights=t64(weights), clip_low=0.2)
    n = len(ratios)
    # Units 0, 1: clipped on the side clipping blocks (A>0, r>1+ε; A<0, r<1−ε): no gradient.
    assert grad[0].item() == 0.0 and grad[1].item() == 0.0
    # Units 2, 3: outside the range on the pessimistic side, and 4, 5 inside: d/dlogp = −A·w·r.
    for i in (2, 3, 4, 5):
        assert grad[i].item() == pytest.approx(-adv[i] * weights[i] * ratios[i] / n, rel=1e-12)
    assert out.clip_frac.item() == pytest.approx(2 / 6)


def test_clipped_policy_loss_clip_higher_widens_the_upper_side():
    logp, old, adv = [math.log(1.25)], [0.0], [1.0]
    grad_symmetric, _ = _loss_grad(logp, old, adv, clip_low=0.2)
    grad_higher, out = _loss_grad(logp, old, adv, clip_low=0.2, clip_high=0.28)
    assert grad_symmetric.item() == 0.0
    assert grad_higher.item() == pytest.approx(-1.25, rel=1e-12)
    assert out.clip_frac.item() == 0.0


@pytest.mark.parametrize("advantage", [1.0, -2.0])
@pytest.mark.parametrize("prob", [0.01, 0.3, 0.9])
def test_luffy_shaped_unit_gradient(advantage, prob):
    # Behaviour log-prob far below: a PPO ratio would be ~e^60 and clipped; shaping ignores it.
    grad, out = _loss_grad([math.log(prob)], [-60.0], [advantage], shaped=torch.tensor([True]))
    logp = torch.tensor(math.log(prob), dtype=F64, requires_grad=True)
    pi = logp.exp()
    (-advantage * pi / (pi + 0.1)).backward()
    assert grad.item() == pytest.approx(logp.grad.item(), rel=1e-12)
    assert grad.item() == pytest.approx(-advantage * 0.1 * prob / (prob + 0.1) ** 2, rel=1e-12)
    assert out.approx_kl.item() == 0.0 and out.clip_frac.item() == 0.0


def test_shaped_units_with_extreme_behaviour_logp_have_finite_gradients():
    grad, _ = _loss_grad([-0.1, -0.2], [-1000.0, -0.2], [1.0, 1.0], shaped=torch.tensor([True, False]))
    assert torch.isfinite(grad).all()


def test_seq_mean_needs_seq_and_unknown_aggregation_raises():
    args = (t64([0.0]), t64([0.0]), t64([1.0]), t64([1.0]))
    with pytest.raises(ValueError, match="seq"):
        clipped_policy_loss(*args, aggregation="seq_mean")
    with pytest.raises(ValueError, match="aggregation"):
        clipped_policy_loss(*args, aggregation="sum")


def test_empty_mask_gives_zero_loss():
    out = clipped_policy_loss(t64([-1.0]), t64([-1.0]), t64([1.0]), t64([0.0]))
    assert out.loss.item() == 0.0


# ---------------------------------------------------------------- value loss, KL, entropy, EV


@EXAMPLES
@given(
    st.lists(
        st.tuples(*[st.floats(-5, 5, allow_nan=False, allow_subnormal=False)] * 3, st.booleans()),
        min_size=1,
        max_size=12,
    ),
    st.sampled_from([None, 0.1, 0.5]),
)
def test_value_loss_matches_loop(rows, clip):
    values, old, returns, mask = (list(column) for column in zip(*rows, strict=True))
    per = []
    for v, o, r in zip(values, old, returns, strict=True):
        loss = (v - r) ** 2
        if clip is not None:
            loss = max(loss, (o + min(max(v - o, -clip), clip) - r) ** 2)
        per.append(loss)
    expected = 0.5 * sum(p for p, m in zip(per, mask, strict=True) if m) / max(sum(mask), 1)
    close(value_loss(t64(values), t64(old), t64(returns), torch.tensor(mask), clip=clip), expected, 1e-9)


def test_value_loss_gradient_stops_outside_the_clip():
    values = t64([2.0, 0.05]).requires_grad_(True)
    value_loss(values, t64([0.0, 0.0]), t64([3.0, 1.0]), torch.ones(2), clip=0.2).backward()
    # Unit 0 moved 2.0 from old toward R=3: the unclipped error (1) < clipped error (2.8), so the
    # clipped constant term wins and the gradient is 0. Unit 1 is inside: 0.5·2·(v−R)/n.
    assert values.grad[0].item() == 0.0
    assert values.grad[1].item() == pytest.approx((0.05 - 1.0) / 2)


@EXAMPLES
@given(
    st.lists(st.tuples(st.floats(-8, 0), st.floats(-8, 0)), min_size=1, max_size=10),
    st.sampled_from(["k1", "k2", "k3"]),
)
def test_kl_penalty_matches_formulas(pairs, kind):
    logp, ref = (list(column) for column in zip(*pairs, strict=True))
    formulas = {
        "k1": lambda lp, rp: lp - rp,
        "k2": lambda lp, rp: 0.5 * (lp - rp) ** 2,
        "k3": lambda lp, rp: math.exp(rp - lp) - (rp - lp) - 1,
    }
    kl = kl_penalty(t64(logp), t64(ref), kind)
    close(kl, [formulas[kind](lp, rp) for lp, rp in pairs], 1e-9)
    if kind != "k1":
        assert torch.all(kl >= 0)


def test_kl_penalty_zero_at_reference_and_rejects_unknown_kind():
    logp = t64([-0.5, -2.0])
    for kind in ("k1", "k2", "k3"):
        assert torch.all(kl_penalty(logp, logp, kind) == 0)
    with pytest.raises(ValueError, match="kind"):
        kl_penalty(logp, logp, "k4")


@EXAMPLES
@given(
    st.integers(1, 4),
    st.integers(1, 6),
    st.lists(st.floats(-10, 10, allow_nan=False), min_size=24, max_size=24),
)
def test_entropy_from_logits_matches_loop(rows, vocab, pool):
    logits = t64(pool[: rows * vocab]).reshape(rows, vocab)
    expected = []
    for row in logits.tolist():
        z = math.log(sum(math.exp(x) for x in row))
        expected.append(-sum(math.exp(x - z) * (x - z) for x in row))
    close(entropy_from_logits(logits), expected, 1e-9)


def test_entropy_from_logits_masked_tokens_and_half_precision():
    logits = torch.tensor([[0.0, 0.0, -torch.inf]], requires_grad=True)
    entropy = entropy_from_logits(logits)
    entropy.sum().backward()
    assert entropy.item() == pytest.approx(math.log(2))
    assert torch.isfinite(logits.grad).all()
    assert entropy_from_logits(torch.zeros(2, 4, dtype=torch.bfloat16)).dtype == torch.bfloat16


@EXAMPLES
@given(st.lists(st.lists(st.floats(-6, 6, allow_nan=False), min_size=1, max_size=5), min_size=1, max_size=5))
def test_categorical_entropy_matches_loop(candidate_scores):
    logp, group, expected = [], [], []
    for g, scores in enumerate(candidate_scores):
        z = math.log(sum(math.exp(s) for s in scores))
        probs = [math.exp(s - z) for s in scores]
        logp += [s - z for s in scores]
        group += [g] * len(scores)
        expected.append(-sum(p * math.log(p) for p in probs if p > 0))
    close(categorical_entropy(t64(logp), tlong(group)), expected, 1e-9)


def test_categorical_entropy_uniform_masked_and_differentiable():
    logp = torch.tensor([math.log(0.25)] * 4 + [0.0, -torch.inf], dtype=F64, requires_grad=True)
    entropy = categorical_entropy(logp, tlong([0, 0, 0, 0, 2, 2]))
    close(entropy.detach(), [math.log(4), 0.0, 0.0])  # group 1 has no candidates
    entropy.sum().backward()
    assert torch.isfinite(logp.grad).all()


@EXAMPLES
@given(
    st.lists(
        st.tuples(st.floats(-5, 5, allow_nan=False), st.floats(-5, 5, allow_nan=False)),
        min_size=2,
        max_size=20,
    )
)
def test_explained_variance_matches_loop(pairs):
    pred, target = (list(column) for column in zip(*pairs, strict=True))
    var_target = statistics.pvariance(target)
    ev = explained_variance(t64(pred), t64(target))
    if len(set(target)) == 1:
        assert math.isnan(ev.item())
    elif var_target > 1e-6:  # below that, rounding in either variance dominates the ratio
        residual = [t - p for p, t in pairs]
        close(ev, 1 - statistics.pvariance(residual) / var_target, 1e-7)


def test_explained_variance_landmarks():
    target = t64([1.0, 2.0, 4.0])
    assert explained_variance(target, target).item() == 1.0
    assert explained_variance(torch.full_like(target, target.mean().item()), target).item() == pytest.approx(
        0.0
    )


# ---------------------------------------------------------------- off-policy weights


@EXAMPLES
@given(
    st.lists(st.tuples(st.floats(-30, 0), st.floats(-30, 0)), min_size=1, max_size=12),
    st.sampled_from([1.0, 1.3, 2.0, 5.0]),
)
def test_truncated_is_matches_loop_never_exceeds_clip_and_is_detached(pairs, is_clip):
    current = torch.tensor([c for c, _ in pairs], requires_grad=True)
    behaviour = torch.tensor([b for _, b in pairs])
    w = offpolicy_weights(current, behaviour, "truncated_is", is_clip=is_clip)
    assert not w.requires_grad and w.dtype == torch.float32
    assert torch.all(w <= torch.tensor(is_clip, dtype=w.dtype))
    expected = [
        min(math.exp(c - b), is_clip) for c, b in zip(current.tolist(), behaviour.tolist(), strict=True)
    ]
    close(w, expected, 1e-5)


@pytest.mark.parametrize("mode", ["none", "luffy"])
def test_none_and_luffy_weights_are_ones(mode):
    current = torch.tensor([-0.1, -5.0], requires_grad=True)
    w = offpolicy_weights(current, torch.tensor([-3.0, -0.1]), mode)
    assert w.tolist() == [1.0, 1.0] and not w.requires_grad


def test_offpolicy_weights_reject_bad_mode_and_clip():
    x = torch.zeros(2)
    with pytest.raises(ValueError, match="mode"):
        offpolicy_weights(x, x, "is")
    with pytest.raises(ValueError, match="is_clip"):
        offpolicy_weights(x, x, "truncated_is", is_clip=0.0)


def test_weight_stats_counts_weights_at_the_clip():
    w = offpolicy_weights(torch.log(torch.tensor([0.9, 0.5, 0.2])), torch.log(torch.tensor([0.1, 0.5, 0.4])),
                          "truncated_is", is_clip=1.3)  # fmt: skip
    stats = weight_stats(w, is_clip=1.3)
    assert stats["clipped_frac"] == pytest.approx(1 / 3)
    assert stats["max"] == pytest.approx(1.3) and stats["min"] == pytest.approx(0.5)
    assert all(math.isnan(v) for v in weight_stats(torch.zeros(0)).values())


# ---------------------------------------------------------------- docstring examples


@pytest.mark.parametrize("name", ["grpo", "gigpo", "gae", "losses", "offpolicy"])
def test_docstring_examples(name):
    result = doctest.testmod(importlib.import_module(f"rspo_kit.algos.{name}"), optionflags=doctest.ELLIPSIS)
    assert result.attempted > 0 and result.failed == 0

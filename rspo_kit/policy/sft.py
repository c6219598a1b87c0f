"""SFT warm start: search-expert demonstrations with detours, and supervised training on action tokens.

Demonstrations come from the partially observable search expert (``experts.py``) on train tasks. With
probability ``p_detour`` a step is a random admissible action instead; the expert then recovers from
where that left it, so the model also sees recovery states. Only the expert's own steps become
training samples (the model should not imitate the detours). Each step is one sample: its prompt,
exactly as the rollout engine will build it, and the action reply; the loss covers the reply only.
"""

from __future__ import annotations

import random
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Literal, NamedTuple

import torch

from rspo_kit.envs.base import Task
from rspo_kit.envs.batch import BatchRunner
from rspo_kit.policy.experts import alfworld_search_action
from rspo_kit.policy.models import save_checkpoint
from rspo_kit.policy.prompts import EpisodeContext, build_prompt
from rspo_kit.policy.rollout import SEARCH_TEMPLATE, Policy, candidate_set, chosen_index
from rspo_kit.policy.scoring import candidate_logprobs, head_logits, left_pad, positions


class Sample(NamedTuple):
    """One demonstration step: the prompt, the reply, and in ``choice`` mode the scored candidates."""

    prompt: list[int]
    reply: list[int]
    candidates: list[list[int]] | None = None  # every admissible action's ids (choice mode)
    chosen: int | None = None  # the teacher's candidate
    verb: str = ""  # the action's first word ("go", "take", "click", ...): for verb-balanced weights
    weight: float = 1.0  # the sample's weight in the loss


def _teacher(env: str) -> Callable[[EpisodeContext], str] | None:
    """The search expert of an env, or None to use the env's own ``expert_action()``."""
    return {"alfworld": alfworld_search_action}.get(env)


def demonstration_tasks(env: str, n: int, exclude_kinds: Sequence[str] = ()) -> list[Task]:
    """The first ``n`` train tasks of ``env`` whose kind (``Task.kind``) is not in ``exclude_kinds``.

    Without exclusions these are ``list_tasks(env, "train", n)``. A warm start from them has never
    seen the kinds left out, while RL and the evaluations, which list their own tasks, still meet
    every kind. A kind ``env`` does not have, or leaving out all of them, is a ValueError naming the
    env's kinds.

    >>> [t.kind for t in demonstration_tasks("alfworld", 3, ["look_at_obj_in_light"])]
    ['pick_and_place_simple', 'pick_clean_then_place_in_recep', 'pick_heat_then_place_in_recep']
    >>> demonstration_tasks("alfworld", 3, ["look_at_lamp"])  # doctest: +ELLIPSIS
    Traceback (most recent call last):
    ValueError: no task kind 'look_at_lamp' in alfworld; its kinds: look_at_obj_in_light, pick_and_place_simple, ...
    """
    from rspo_kit.envs.registry import list_tasks

    train = list_tasks(env, split="train")
    if not exclude_kinds:
        return train[:n]
    known = sorted({t.kind for t in train if t.kind})
    unknown = [k for k in exclude_kinds if k not in known]
    if unknown:
        kinds = ", ".join(known) or "none (its tasks name no Task.kind)"
        raise ValueError(f"no task kind {', '.join(map(repr, unknown))} in {env}; its kinds: {kinds}")
    kept = [t for t in train if t.kind not in exclude_kinds]
    if not kept:
        raise ValueError(
            f"leaving out {', '.join(exclude_kinds)} leaves no train task of {env} to demonstrate"
        )
    return kept[:n]


def collect_demonstrations(
    policy: Policy,
    runner: BatchRunner,
    tasks: Sequence[Task],
    p_detour: float = 0.15,
    seed: int = 0,
    progress_bar: bool = True,
    follow: Literal["teacher", "policy"] = "teacher",
    label_noise: float = 0.0,
) -> tuple[list[Sample], dict]:
    """Per-step (prompt, teacher action) samples on ``tasks``, and how the episodes went.

    ``follow="teacher"``: the teacher acts (a random detour with probability ``p_detour``) and each of
    its own steps is a sample; the stats give its success rate. ``follow="policy"`` is DAgger (Ross et
    al., 2011): the policy acts greedily, and every distinct state it visits becomes a sample labelled
    with what the teacher would do there: the states a greedy warm start loops in when one wrong step
    took it off the teacher's path, which teacher demonstrations never show. The stats then give the
    policy's success rate and how often it already agreed with the teacher.

    ``label_noise``: the share of samples whose label is a uniformly random admissible action instead
    of the teacher's (the teacher still acts). SFT to convergence then gives a start that knows the task
    but is unsure of it: it puts about ``1 - label_noise`` on the teacher's action, the rest spread over
    the candidates, so its sampled success falls smoothly as the noise grows (the chain testbed's
    starting-difficulty knob), where fewer updates only switch between knowing and not knowing.
    """
    from tqdm.auto import tqdm

    if follow not in ("teacher", "policy"):
        raise ValueError(f"follow must be 'teacher' or 'policy', got {follow!r}")
    if not 0.0 <= label_noise < 1.0:
        raise ValueError(f"label_noise must be in [0, 1), got {label_noise}")
    rng = random.Random(seed)
    noise_rng = random.Random(seed + 1)  # its own stream: noise 0 leaves the demonstrations unchanged
    contexts: dict[int, EpisodeContext] = {}
    for slot, obs in enumerate(runner.reset(tasks)):
        if obs is not None:
            contexts[slot] = EpisodeContext(tasks[slot].env, obs.instruction, obs.text, obs.admissible)
    samples: list[Sample] = []
    seen: set[tuple] = set()  # (prompt, label) pairs already sampled: a loop revisits its states
    won = states = agreed = 0
    bar = tqdm(total=len(tasks), desc=f"demonstrations ({follow})", disable=not progress_bar, leave=False)
    while contexts:
        slots = sorted(contexts)
        env_expert = runner.expert(slots) if any(_teacher(tasks[s].env) is None for s in slots) else {}
        labels = {}
        for s in slots:
            teacher = _teacher(tasks[s].env)
            labels[s] = teacher(contexts[s]) if teacher else env_expert.get(s)
        prompts = {s: build_prompt(contexts[s], policy.tokenizer, policy.prompt) for s in slots}
        if follow == "policy":
            chosen = _greedy_actions(policy, [prompts[s] for s in slots], [contexts[s] for s in slots])
            actions = dict(zip(slots, chosen, strict=True))
        else:
            actions = {}
            for s in slots:
                if labels[s] is None or (rng.random() < p_detour and contexts[s].admissible):
                    pool = [a for a in contexts[s].admissible if a != "search[...]"] or ["look"]
                    actions[s] = rng.choice(pool)
                    labels[s] = None  # the model should not imitate a detour
                else:
                    actions[s] = labels[s]
        for s in slots:
            label = labels[s]
            if label is None:
                continue
            states += 1
            agreed += actions[s] == label or _verb(actions[s]) == _verb(label) == "search"
            if label_noise and noise_rng.random() < label_noise and contexts[s].admissible:
                label = noise_rng.choice(contexts[s].admissible)
            key = (tuple(prompts[s]), label)
            if follow == "teacher" or key not in seen:
                seen.add(key)
                samples.append(_sample(policy, contexts[s], label, prompts[s]))
        for s, res in runner.step(actions).items():
            if res.done:
                won += res.won
                del contexts[s]
                bar.update(1)
            else:
                contexts[s].advance(actions[s], res.obs.text, res.obs.admissible)
    bar.close()
    stats = {"samples": len(samples), f"{follow}_success": won / max(1, len(tasks))}
    if follow == "policy":
        stats.update(states=states, agreement=agreed / max(1, states))
    return samples, stats


def _greedy_actions(
    policy: Policy, prompts: list[list[int]], contexts: Sequence[EpisodeContext]
) -> list[str]:
    """The policy's greedy actions in ``contexts`` (one batched model call), as a rollout takes them."""
    from rspo_kit.policy.rollout import RolloutConfig, _choose

    was_training = policy.model.training
    policy.model.eval()
    with torch.no_grad():
        choices = _choose(policy, prompts, contexts, RolloutConfig(greedy=True), None)
    policy.model.train(was_training)
    return [c["action"] for c in choices]


def _verb(action: str) -> str:
    """'take mug 1 from cabinet 2' -> 'take'; 'search[red shoes]' -> 'search'."""
    return action.split("[", 1)[0].split(" ", 1)[0]


def _sample(policy: Policy, ctx: EpisodeContext, action: str, prompt: list[int]) -> Sample:
    verb = _verb(action)
    if policy.mode != "choice":
        return Sample(prompt, policy.encode_action(action), verb=verb)
    actions, cands = candidate_set(policy, ctx.admissible, ctx.instruction)
    k = chosen_index(actions, action)
    if k is not None and actions[k] == SEARCH_TEMPLATE:  # as the rollout writes it: prefix, then query
        query = policy.tokenizer(action[7:], add_special_tokens=False)["input_ids"]
        return Sample(prompt, cands[k] + query, cands, k, verb)
    # a search offered as one whole candidate is learnt as that candidate (the teacher's own query differs)
    return Sample(prompt, cands[k] if k is not None else policy.encode_action(action), cands, k, verb)


def balance_verbs(samples: Sequence[Sample], power: float) -> list[Sample]:
    """Weights proportional to freq(verb) ** -power, mean 1: rare decisions (take, move) count more.

    ALFWorld demonstrations are half ``go to`` steps and a tenth ``take``; ``power=0.5`` weighs a
    ``take`` sample about twice a ``go`` sample instead of equal (0: all weights 1).

    >>> demos = [Sample([], [], verb="go")] * 3 + [Sample([], [], verb="take")]
    >>> [round(s.weight, 3) for s in balance_verbs(demos, 1.0)]
    [0.667, 0.667, 0.667, 2.0]
    """
    counts: dict[str, int] = {}
    for s in samples:
        counts[s.verb] = counts.get(s.verb, 0) + 1
    raw = [counts[s.verb] ** -power for s in samples]
    mean = sum(raw) / max(1, len(raw))
    return [s._replace(weight=r / mean) for s, r in zip(samples, raw, strict=True)]


@dataclass(frozen=True)
class SFTConfig:
    lr: float = 2e-3
    batch_size: int = 32
    epochs: int = 3
    time_budget_s: float | None = None  # stop early when the budget is spent
    # stop after this many updates (the schedule anneals over them): unlike a time budget, the same
    # warm start on any machine
    max_updates: int | None = None
    weight_decay: float = 0.0
    seed: int = 0
    # choice mode: weight of the cross-entropy over the candidate set (what the policy samples
    # from) added to the reply NLL. The NLL alone left `take X from Y` underweighted: a 20-minute
    # run picked it in 4 of 35 teacher-forced states, while `go to` steps dominate the token count.
    choice_weight: float = 1.0
    # samples weighted by freq(verb) ** -balance (0: unweighted); see ``balance_verbs``
    balance: float = 0.0
    # DAgger (``warm_start``): after each of the first ``dagger_rounds`` equal shares of the budget,
    # the policy acts greedily on ``dagger_tasks`` train tasks and the teacher labels its states
    dagger_rounds: int = 0
    dagger_tasks: int = 100
    # share of teacher-demonstration labels replaced by a random admissible action (see
    # ``collect_demonstrations``); 0 keeps the teacher's labels
    label_noise: float = 0.0

    def __post_init__(self) -> None:
        if self.lr <= 0 or self.batch_size < 1 or self.epochs < 1:
            raise ValueError(f"SFTConfig needs lr > 0, batch_size >= 1, epochs >= 1; got {self}")
        if self.max_updates is not None and self.max_updates < 0:
            raise ValueError(f"SFTConfig.max_updates must be >= 0 or None, got {self.max_updates}")
        if self.choice_weight < 0:
            raise ValueError(f"SFTConfig.choice_weight must be >= 0, got {self.choice_weight}")
        if self.balance < 0:
            raise ValueError(f"SFTConfig.balance must be >= 0, got {self.balance}")
        if self.dagger_rounds < 0 or self.dagger_tasks < 1:
            raise ValueError(f"SFTConfig needs dagger_rounds >= 0 and dagger_tasks >= 1; got {self}")


def sft_loss(model, batch: Sequence[Sample], pad_id: int) -> torch.Tensor:
    """Mean negative log-likelihood of the reply tokens (prompt tokens carry no loss).

    Replies are a few tokens after a ~200-token prompt, so the output head runs on the reply
    positions only (the full-vocabulary head and log-softmax over every position cost ~15% of a step).
    """
    seqs = [s[0] + s[1] for s in batch]
    device = next(model.parameters()).device
    ids, mask = left_pad(seqs, pad_id, device)  # (B, L)
    width = ids.shape[1]
    replies = [s[1] for s in batch]
    rows = torch.tensor([i for i, r in enumerate(replies) for _ in r], device=device)
    # position t predicts token t+1: the reply's tokens are predicted from the positions before them
    cols = torch.tensor([width - 1 - len(r) + j for r in replies for j in range(len(r))], device=device)
    targets = ids[rows, cols + 1]
    weights = torch.tensor([s.weight for s in batch], device=device)[rows]  # (N,) per reply token
    _, logits = head_logits(
        model, rows, cols, input_ids=ids, attention_mask=mask, position_ids=positions(mask)
    )
    nll = torch.nn.functional.cross_entropy(logits.float(), targets, reduction="none")
    return (weights * nll).sum() / weights.sum()


def choice_loss(model, batch: Sequence[Sample], pad_id: int, choice_weight: float = 1.0) -> torch.Tensor:
    """``choice`` mode SFT: cross-entropy over the candidate set plus the reply NLL, from one pass.

    The softmax over candidates is what ``choice`` mode samples from (GLAM, Carta et al. 2023), so the
    cross-entropy trains exactly what greedy evaluation ranks by; the NLL of the teacher's candidate
    tokens comes from the same candidate pass (no second prompt forward). A search's generated query
    (reply tokens after the ``search[`` candidate) adds its own NLL. Samples without candidates get
    the plain reply NLL.
    """
    scored = [s for s in batch if s.candidates and s.chosen is not None]
    plain = [s for s in batch if not (s.candidates and s.chosen is not None)]
    queries = [
        Sample(s.prompt + s.candidates[s.chosen], s.reply[len(s.candidates[s.chosen]) :], weight=s.weight)
        for s in scored
        if len(s.reply) > len(s.candidates[s.chosen])
    ]
    losses, weights = [], []
    if scored:
        seq_lp = candidate_logprobs(model, [s.prompt for s in scored], [s.candidates for s in scored], pad_id)
        w = torch.tensor([s.weight for s in scored], device=seq_lp[0].device)  # (B,)
        chosen = torch.stack([lp[s.chosen] for lp, s in zip(seq_lp, scored, strict=True)])  # (B,)
        ce = -torch.stack([lp.log_softmax(-1)[s.chosen] for lp, s in zip(seq_lp, scored, strict=True)])
        tokens = torch.tensor([len(s.candidates[s.chosen]) for s in scored], device=w.device)
        losses.append(-(w * chosen).sum() / (w * tokens).sum() + choice_weight * (w * ce).sum() / w.sum())
        weights.append(float(w.sum()))
    for extra in (queries, plain):
        if extra:
            losses.append(sft_loss(model, extra, pad_id))
            weights.append(sum(s.weight for s in extra))
    total = sum(weights)
    return sum(w / total * loss for w, loss in zip(weights, losses, strict=True))


def _length_bucketed(order: list[int], samples: Sequence[Sample], batch_size: int, rng) -> list[list[int]]:
    """Batches of similar prompt length (less left padding), in random order.

    Shuffled samples are cut into chunks of 32 batches; each chunk is sorted by prompt length and
    split into batches, so every batch is still a random draw from the data at large.
    """
    chunk = 32 * batch_size
    batches = []
    for c in range(0, len(order), chunk):
        part = sorted(order[c : c + chunk], key=lambda i: len(samples[i].prompt))
        batches += [part[b : b + batch_size] for b in range(0, len(part), batch_size)]
    rng.shuffle(batches)
    return batches


def train_sft(policy: Policy, samples: Sequence[Sample], cfg: SFTConfig, progress_bar: bool = True) -> dict:
    """Train ``policy.model`` on ``samples`` in place; returns loss history and timing."""
    from tqdm.auto import tqdm

    if not samples:
        raise ValueError("train_sft needs at least one sample")
    model, pad_id = policy.model, policy.tokenizer.pad_token_id
    if cfg.balance:
        samples = balance_verbs(samples, cfg.balance)
    opt = torch.optim.AdamW(model.parameters(), lr=cfg.lr, weight_decay=cfg.weight_decay)
    rng = random.Random(cfg.seed)
    steps_per_epoch = (len(samples) + cfg.batch_size - 1) // cfg.batch_size
    total = steps_per_epoch * cfg.epochs
    if cfg.max_updates is not None:
        total = min(total, cfg.max_updates)
    start, losses, lrs = time.perf_counter(), [], []
    model.train()
    bar = tqdm(total=total, desc="sft", disable=not progress_bar, leave=False)
    order = list(range(len(samples)))
    for _epoch in range(cfg.epochs if total else 0):
        rng.shuffle(order)
        for idx in _length_bucketed(order, samples, cfg.batch_size, rng):
            batch = [samples[i] for i in idx]
            lrs.append(cfg.lr * lr_factor(len(losses), total, time.perf_counter() - start, cfg.time_budget_s))
            for group in opt.param_groups:
                group["lr"] = lrs[-1]
            if cfg.choice_weight and policy.mode == "choice":
                loss = choice_loss(model, batch, pad_id, cfg.choice_weight)
            else:
                loss = sft_loss(model, batch, pad_id)
            opt.zero_grad(set_to_none=True)
            loss.backward()
            torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
            opt.step()
            losses.append(loss.item())
            bar.update(1)
            bar.set_postfix(loss=f"{losses[-1]:.3f}")
            out_of_time = cfg.time_budget_s is not None and time.perf_counter() - start > cfg.time_budget_s
            if out_of_time or len(losses) >= total:
                break
        else:
            continue
        break
    bar.close()
    model.eval()
    return {"losses": losses, "lrs": lrs, "seconds": time.perf_counter() - start, "updates": len(losses)}


def lr_factor(
    step: int, total: int, elapsed: float = 0.0, budget: float | None = None, warmup: int = 20
) -> float:
    """SFT learning-rate multiplier: linear warm-up, then linear decay to 5% at the end of the run.

    The end is whichever comes first, the last step or the time budget: a run cut short by its budget
    still anneals (before, a 10-minute warm start of 50 nominal epochs stopped at ~3% of its schedule,
    i.e. at full learning rate).

    >>> [round(lr_factor(s, total=100), 2) for s in (0, 50, 99)]
    [0.05, 0.5, 0.05]
    >>> lr_factor(100, total=10_000, elapsed=450.0, budget=600.0)  # 75% of the time spent
    0.25
    """
    progress = step / total
    if budget:
        progress = max(progress, elapsed / budget)
    return min(1.0, (step + 1) / warmup) * max(0.05, 1.0 - progress)


# Every warm start trains on this many torch threads, whatever the caller set. SFT on two threads is
# not bit-reproducible: one WebShop warm start built twice on one machine with --threads 2 gave SFT
# losses that parted at update 228 (by one ulp, then growing); on one thread, builds repeat bit for bit
# (60 updates, twice, and across two versions of the code).
SFT_THREADS = 1


def warm_start(
    policy: Policy,
    runner: BatchRunner,
    tasks: Sequence[Task],
    cfg: SFTConfig,
    p_detour: float = 0.15,
    seed: int = 0,
    progress_bar: bool = True,
) -> dict:
    """Teacher demonstrations on ``tasks``, then SFT, with ``cfg.dagger_rounds`` rounds of DAgger.

    The SFT time budget (``cfg.time_budget_s``; the demonstrations are not counted) and the update
    budget (``cfg.max_updates``) are cut into ``dagger_rounds + 1`` equal phases. Between phases the
    policy acts greedily on ``dagger_tasks`` of ``tasks`` and the teacher's labels of the states it
    visited join the data (``collect_demonstrations`` with ``follow="policy"``); that collection is paid
    from the next phase's share of the time. Without a budget every phase trains ``cfg.epochs`` epochs.
    Returns the demonstration stats, each DAgger round's stats (the policy's success and agreement with
    the teacher before that round), the SFT history and the machine it trained on. Runs on
    ``SFT_THREADS`` torch threads and gives the caller's back after.
    """
    from rspo_kit.records.machine import machine_record

    threads = torch.get_num_threads()
    torch.set_num_threads(SFT_THREADS)
    try:
        return {
            **_warm_start(policy, runner, tasks, cfg, p_detour, seed, progress_bar),
            "machine": machine_record(),
        }
    finally:
        torch.set_num_threads(threads)


def _warm_start(policy, runner, tasks, cfg, p_detour, seed, progress_bar) -> dict:
    samples, demo = collect_demonstrations(
        policy, runner, tasks, p_detour, seed, progress_bar, label_noise=cfg.label_noise
    )
    rng, start = random.Random(seed), time.perf_counter()
    phases = cfg.dagger_rounds + 1
    losses, rounds = [], []
    for phase in range(phases):
        if phase:
            picked = rng.sample(list(tasks), min(cfg.dagger_tasks, len(tasks)))
            new, stats = collect_demonstrations(
                policy, runner, picked, seed=seed + phase, progress_bar=progress_bar, follow="policy"
            )
            samples = [*samples, *new]
            rounds.append({**stats, "seconds": time.perf_counter() - start})
        budget = cfg.time_budget_s
        if budget is not None:  # what is left of the budget up to the end of this phase
            budget = max(0.0, budget * (phase + 1) / phases - (time.perf_counter() - start))
        updates = cfg.max_updates
        if updates is not None:  # this phase's share of the updates
            updates = updates * (phase + 1) // phases - len(losses)
        phase_cfg = replace(cfg, time_budget_s=budget, max_updates=updates)
        losses += train_sft(policy, samples, phase_cfg, progress_bar)["losses"]
    sft = {"losses": losses, "seconds": time.perf_counter() - start, "updates": len(losses)}
    return {"demonstrations": demo, "dagger": rounds, "sft": sft, "samples": len(samples)}


def save_policy(policy: Policy, folder: Path) -> Path:
    """Checkpoint a policy so that ``Policy.load(folder)`` prompts and acts as the policy that was saved.

    The folder holds ``weights_sha256.json``, the digest of every stored tensor, which loading verifies
    (``rspo_kit.policy.models.verify_weights``): a damaged or incomplete folder never loads silently.
    """
    meta = {
        "name": Path(folder).name,
        "action_mode": policy.mode,
        "max_prompt_tokens": policy.prompt.max_tokens,
        "search_query": policy.search_query,
    }
    return save_checkpoint(policy.model, policy.tokenizer, meta, folder)

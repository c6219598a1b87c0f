"""Differentiable log-probs of recorded steps under the current policy: what a policy update needs.

A step's *units* are what the policy gradient runs over. In ``free`` mode they are the reply tokens
(old log-probs: ``Step.token_logprobs``). In ``choice`` mode a step is one unit: the log-softmax of
the chosen candidate over the candidate set (GLAM, Carta et al. 2023), plus, for a WebShop search,
the log-probs of the query tokens the model wrote after ``search[`` (old log-prob: ``Step.logprob``).
Both are computed with the rollout's temperature so that ratios compare like with like.

Optionally the hidden state of the last prompt position comes back too: the trunk features a value
head reads (PPO's critic), at no extra forward pass.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import torch

from rspo_kit.policy.rollout import Policy, Step
from rspo_kit.policy.scoring import head_logits, left_pad, positions


@dataclass
class StepScores:
    logp: list[torch.Tensor]  # per step: (U_i,) log-probs of its units (choice: U_i = 1)
    entropy: list[torch.Tensor]  # per step: (U_i,) entropy of the distribution each unit was drawn from
    hidden: torch.Tensor | None  # (S, H) last prompt position's final hidden state, if asked


def old_unit_logprobs(step: Step, mode: str) -> list[float]:
    """The behaviour log-probs of a step's units, as recorded at rollout time."""
    return [step.logprob] if mode == "choice" else list(step.token_logprobs)


def step_tokens(step: Step) -> int:
    """Tokens a step puts through the model when it is scored: prompt + candidates, or prompt + reply."""
    return len(step.prompt_ids) + (
        sum(map(len, step.candidates)) if step.candidates else len(step.action_ids)
    )


def score_steps(
    policy: Policy, steps: Sequence[Step], temperature: float = 1.0, hidden: bool = False
) -> StepScores:
    """Log-probs (with grad if enabled) of each recorded step's units under ``policy``."""
    if policy.mode == "choice":
        return _score_choice(policy, steps, temperature, hidden)
    return _score_free(
        policy, [s.prompt_ids for s in steps], [s.action_ids for s in steps], temperature, hidden
    )


def prompt_states(policy: Policy, steps: Sequence[Step]) -> torch.Tensor:
    """(S, H) final hidden state at each step's last prompt token, from a prompt-only pass: what a
    value head reads for steps whose units need no scoring (PPO's pre-pass of on-policy steps)."""
    prompts = [s.prompt_ids for s in steps]
    device = next(policy.model.parameters()).device
    width = max(len(p) for p in prompts)
    rows = torch.arange(len(prompts), device=device)
    _, states, _ = _forward(
        policy.model, prompts, policy.tokenizer.pad_token_id, rows, torch.full_like(rows, width - 1), True
    )
    return states[:, -1]  # left padding: the last column is every prompt's last token


def _forward(model, seqs: Sequence[Sequence[int]], pad_id: int, head_rows, head_cols, hidden: bool):
    """Run the trunk once over left-padded ``seqs``; logits only at (rows, cols); last-position hidden."""
    device = next(model.parameters()).device
    ids, mask = left_pad(seqs, pad_id, device)
    states, logits = head_logits(
        model, head_rows, head_cols, input_ids=ids, attention_mask=mask, position_ids=positions(mask)
    )
    return ids, states, logits.float()


def _score_free(policy: Policy, prompts, replies, temperature: float, hidden: bool) -> StepScores:
    """Teacher-forced reply tokens; the head runs only where a reply token is predicted."""
    seqs = [list(p) + list(r) for p, r in zip(prompts, replies, strict=True)]
    width = max(len(s) for s in seqs)
    rows = [i for i, r in enumerate(replies) for _ in r]
    cols = [width - 1 - len(r) + j for r in replies for j in range(len(r))]  # position t predicts t+1
    device = next(policy.model.parameters()).device
    ids, states, logits = _forward(
        policy.model,
        seqs,
        policy.tokenizer.pad_token_id,
        torch.tensor(rows, device=device),
        torch.tensor(cols, device=device),
        hidden,
    )
    logp_all = (logits / temperature).log_softmax(-1)  # (N, V)
    targets = ids[torch.tensor(rows, device=device), torch.tensor(cols, device=device) + 1]
    token_lp = logp_all.gather(-1, targets[:, None]).squeeze(-1)  # (N,)
    token_ent = -(logp_all.exp() * logp_all).sum(-1)  # (N,)
    sizes = [len(r) for r in replies]
    last_prompt = torch.tensor([width - 1 - len(r) for r in replies], device=device)
    feats = states[torch.arange(len(seqs), device=device), last_prompt] if hidden else None
    return StepScores(list(token_lp.split(sizes)), list(token_ent.split(sizes)), feats)


def _score_choice(policy: Policy, steps: Sequence[Step], temperature: float, hidden: bool) -> StepScores:
    """Candidate log-softmax of the chosen action (+ the query tokens of a search)."""
    from rspo_kit.policy.scoring import candidate_scores

    missing = [i for i, s in enumerate(steps) if not s.candidates or s.chosen is None]
    if missing:
        raise ValueError(f"choice-mode steps need candidates and chosen; steps {missing[:5]} have none")
    pad_id = policy.tokenizer.pad_token_id
    # scored as the rollout scored them (policy.choice_score): the update optimises what was sampled
    seq_lp, last_states = candidate_scores(
        policy.model,
        [s.prompt_ids for s in steps],
        [s.candidates for s in steps],
        pad_id,
        score=policy.choice_score,
    )
    logp, entropy = [], []
    for lp, s in zip(seq_lp, steps, strict=True):
        dist = (lp / temperature).log_softmax(-1)  # (C,)
        logp.append(dist[s.chosen])
        entropy.append(-(dist.exp() * dist).sum())
    # WebShop searches: the model wrote the query after the chosen `search[` candidate
    query = [i for i, s in enumerate(steps) if len(s.action_ids) > len(s.candidates[s.chosen])]
    if query:
        q = _score_free(
            policy,
            [list(steps[i].prompt_ids) + list(steps[i].candidates[steps[i].chosen]) for i in query],
            [steps[i].action_ids[len(steps[i].candidates[steps[i].chosen]) :] for i in query],
            temperature,
            False,
        )
        for i, lp in zip(query, q.logp, strict=True):
            logp[i] = logp[i] + lp.sum()
    feats = last_states if hidden else None
    return StepScores([x.reshape(1) for x in logp], [x.reshape(1) for x in entropy], feats)

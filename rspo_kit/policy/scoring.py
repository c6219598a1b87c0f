"""Token-level scoring of prompts: candidate log-probs (``choice`` mode) and sampled replies (``free``).

Both work on batches of left-padded prompts. Position ids are derived from the attention mask so that
a left-padded prompt sees the same positions as the same prompt alone; replies are sliced at the
padded prompt width (``sequences[:, input_ids.shape[1]:]``), never at each prompt's own length.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import torch
from torch.nn import functional as F


def left_pad(seqs: Sequence[Sequence[int]], pad_id: int, device) -> tuple[torch.Tensor, torch.Tensor]:
    """(input_ids, attention_mask), both (B, L), padded on the left."""
    width = max(len(s) for s in seqs)
    ids = torch.full((len(seqs), width), pad_id, dtype=torch.long)
    mask = torch.zeros((len(seqs), width), dtype=torch.long)
    for i, s in enumerate(seqs):
        if s:
            ids[i, width - len(s) :] = torch.tensor(s, dtype=torch.long)
            mask[i, width - len(s) :] = 1
    return ids.to(device), mask.to(device)


def positions(mask: torch.Tensor) -> torch.Tensor:
    return (mask.cumsum(-1) - 1).clamp(min=0)


def candidate_logprobs(
    model,
    prompts: Sequence[Sequence[int]],
    candidates: Sequence[Sequence[Sequence[int]]],
    pad_id: int,
    max_batch: int = 512,
) -> list[torch.Tensor]:
    """Summed token log-prob of every candidate reply after its prompt: one (C_b,) tensor per prompt.

    The prompt is run once and its KV cache reused for all of its candidates (GLAM-style scoring,
    Carta et al. 2023). Prompts are processed in chunks holding at most ``max_batch`` candidates.
    Differentiable when called with grad enabled (the policy gradient of ``choice`` mode).
    """
    device = next(model.parameters()).device
    out: list[torch.Tensor] = []
    start = 0
    while start < len(prompts):
        end, total = start, 0
        while end < len(prompts) and (end == start or total + len(candidates[end]) <= max_batch):
            total += len(candidates[end])
            end += 1
        out += _score_chunk(model, prompts[start:end], candidates[start:end], pad_id, device)
        start = end
    return out


def _score_chunk(model, prompts, candidates, pad_id, device) -> list[torch.Tensor]:
    ids, mask = left_pad(prompts, pad_id, device)  # (B, L)
    # only the last prompt position predicts (the first candidate token): skip the head elsewhere
    first = model(
        input_ids=ids, attention_mask=mask, position_ids=positions(mask), use_cache=True, logits_to_keep=1
    )
    owner = torch.tensor([b for b, cands in enumerate(candidates) for _ in cands], device=device)
    flat = [c for cands in candidates for c in cands]
    width = max(len(c) for c in flat)
    cand = torch.full((len(flat), width), pad_id, dtype=torch.long, device=device)
    cmask = torch.zeros((len(flat), width), dtype=torch.long, device=device)
    for i, c in enumerate(flat):
        cand[i, : len(c)] = torch.tensor(c, dtype=torch.long)
        cmask[i, : len(c)] = 1
    cache = first.cache
    cache.batch_select_indices(owner)  # (N, ...) one copy of its prompt's cache per candidate
    prompt_len = mask.sum(-1)[owner]  # (N,)
    pos = prompt_len[:, None] + torch.arange(width, device=device)[None]  # (N, T)
    second = model(
        input_ids=cand, attention_mask=torch.cat([mask[owner], cmask], dim=1), position_ids=pos, cache=cache
    )
    # Token t of a candidate is predicted by the prompt's last position (t=0) or candidate token t-1.
    logits = torch.cat([first.logits[owner, -1:], second.logits[:, :-1]], dim=1).float()  # (N, T, V)
    token_lp = logits.log_softmax(-1).gather(-1, cand[..., None]).squeeze(-1) * cmask  # (N, T)
    seq_lp = token_lp.sum(-1)  # (N,)
    return list(torch.split(seq_lp, [len(c) for c in candidates]))


@dataclass
class Generation:
    reply_ids: list[list[int]]  # sampled tokens per prompt, up to and including the stop token
    logprobs: list[list[float]]  # behaviour log-prob of each reply token (temperature-scaled policy)


@torch.no_grad()
def generate(
    model,
    prompts: Sequence[Sequence[int]],
    pad_id: int,
    stop_ids: Sequence[int],
    max_new_tokens: int = 32,
    temperature: float = 1.0,
    top_p: float = 1.0,
    greedy: bool = False,
    generator: torch.Generator | None = None,
) -> Generation:
    """Batched sampling with a KV cache; stops each row at its first stop token."""
    device = next(model.parameters()).device
    ids, mask = left_pad(prompts, pad_id, device)
    pos = positions(mask)
    out = model(input_ids=ids, attention_mask=mask, position_ids=pos, use_cache=True)
    cache, next_pos = out.cache, pos[:, -1:] + 1
    logits = out.logits[:, -1].float()  # (B, V)
    b = len(prompts)
    replies: list[list[int]] = [[] for _ in range(b)]
    lps: list[list[float]] = [[] for _ in range(b)]
    finished = torch.zeros(b, dtype=torch.bool, device=device)
    stops = torch.tensor(list(stop_ids), device=device)
    for _ in range(max_new_tokens):
        scaled = logits / max(temperature, 1e-6)
        logp = scaled.log_softmax(-1)
        if greedy:
            tok = logp.argmax(-1)
        else:
            probs = _top_p(logp.exp(), top_p)
            tok = torch.multinomial(probs.cpu(), 1, generator=generator).squeeze(-1).to(device)
        tok_lp = logp.gather(-1, tok[:, None]).squeeze(-1)
        for i in range(b):
            if not finished[i]:
                replies[i].append(int(tok[i]))
                lps[i].append(float(tok_lp[i]))
        finished |= torch.isin(tok, stops)
        if bool(finished.all()):
            break
        tok = torch.where(finished, torch.full_like(tok, pad_id), tok)
        mask = torch.cat([mask, (~finished).long()[:, None]], dim=1)
        out = model(input_ids=tok[:, None], attention_mask=mask, position_ids=next_pos, cache=cache)
        cache, next_pos, logits = out.cache, next_pos + 1, out.logits[:, -1].float()
    return Generation(replies, lps)


def _top_p(probs: torch.Tensor, top_p: float) -> torch.Tensor:
    if top_p >= 1.0:
        return probs
    sorted_p, order = probs.sort(-1, descending=True)
    keep = sorted_p.cumsum(-1) - sorted_p < top_p  # always keeps the most likely token
    sorted_p = sorted_p * keep
    return torch.zeros_like(probs).scatter(-1, order, sorted_p) / sorted_p.sum(-1, keepdim=True)


def reply_logprobs(model, prompts, replies, pad_id) -> list[torch.Tensor]:
    """Per-token log-probs of given replies after their prompts (teacher forcing; differentiable)."""
    device = next(model.parameters()).device
    seqs = [list(p) + list(r) for p, r in zip(prompts, replies, strict=True)]
    ids, mask = left_pad(seqs, pad_id, device)
    logits = model(input_ids=ids, attention_mask=mask, position_ids=positions(mask)).logits.float()
    logp = F.log_softmax(logits[:, :-1], -1).gather(-1, ids[:, 1:, None]).squeeze(-1)  # (B, L-1)
    width = ids.shape[1]
    return [logp[i, width - 1 - len(r) :] for i, r in enumerate(replies)]

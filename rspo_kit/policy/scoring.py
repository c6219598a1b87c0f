"""Token-level scoring of prompts: candidate log-probs (``choice`` mode) and sampled replies (``free``).

Candidates are scored with each prompt packed together with all of its candidates under a tree-shaped
attention mask; a packed row never exceeds the model's ``max_position_embeddings`` (a prompt with more
candidate tokens than fit is packed in several rows, each with the prompt). Generation works on left-padded prompts: position ids are derived from the attention
mask so that a left-padded prompt sees the same positions as the same prompt alone, and replies are
sliced at the padded prompt width (``sequences[:, input_ids.shape[1]:]``), never at each prompt's
own length.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Literal

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


# How a candidate's token log-probs become its score in ``choice`` mode: their ``sum`` (the candidate's
# log-likelihood; GLAM) or their ``mean`` (length-normalised: a long candidate is not penalised for
# having more tokens, so an untrained policy does not pile onto the shortest action)
ChoiceScore = Literal["sum", "mean"]


def positions(mask: torch.Tensor) -> torch.Tensor:
    return (mask.cumsum(-1) - 1).clamp(min=0)


def candidate_logprobs(
    model,
    prompts: Sequence[Sequence[int]],
    candidates: Sequence[Sequence[Sequence[int]]],
    pad_id: int,
    **options,
) -> list[torch.Tensor]:
    """The scores of ``candidate_scores`` alone (same arguments and ``options``): one (C_b,) tensor per
    prompt, differentiable when called with grad enabled (the policy gradient of ``choice`` mode)."""
    return candidate_scores(model, prompts, candidates, pad_id, **options)[0]


def max_positions(model) -> int | None:
    """The longest sequence ``model`` was built for (its config's ``max_position_embeddings``; a peft
    wrapper passes its base model's config on); None where the config does not say."""
    return getattr(getattr(model, "config", None), "max_position_embeddings", None)


def _row_groups(
    prompts: Sequence[Sequence[int]], candidates: Sequence[Sequence[Sequence[int]]], max_length: int | None
) -> list[tuple[int, Sequence[Sequence[int]]]]:
    """(prompt index, candidates) of every packed row: each prompt's candidates in order, split where
    the prompt and the candidates so far would exceed ``max_length`` tokens (one row per prompt where
    all fit, and always where ``max_length`` is None)."""
    rows: list[tuple[int, Sequence[Sequence[int]]]] = []
    for b, (prompt, cands) in enumerate(zip(prompts, candidates, strict=True)):
        if max_length is None or len(prompt) + sum(len(c) for c in cands) <= max_length:
            rows.append((b, cands))
            continue
        group: list[Sequence[int]] = []
        width = len(prompt)
        for c, cand in enumerate(cands):
            if len(prompt) + len(cand) > max_length:
                raise ValueError(
                    f"candidate {c} of prompt {b} has {len(cand)} tokens: with its prompt of {len(prompt)} "
                    f"it exceeds the model's max_position_embeddings ({max_length}); lower the prompt budget "
                    "(max_prompt_tokens) or shorten the actions"
                )
            if group and width + len(cand) > max_length:
                rows.append((b, group))
                group, width = [], len(prompt)
            group.append(cand)
            width += len(cand)
        rows.append((b, group))
    return rows


def candidate_scores(
    model,
    prompts: Sequence[Sequence[int]],
    candidates: Sequence[Sequence[Sequence[int]]],
    pad_id: int,
    max_batch: int = 512,
    score: ChoiceScore = "sum",
    max_length: int | None = None,
) -> tuple[list[torch.Tensor], torch.Tensor]:
    """Score of every candidate reply after its prompt, one (C_b,) tensor per prompt (``score="sum"``:
    the summed token log-prob, ``"mean"``: the mean token log-prob of the candidate), and from the
    same pass each prompt's last final hidden state (B, H).

    Each prompt is packed with all of its candidates into one sequence, and a 4-D attention mask
    lets every candidate token see the prompt and the earlier tokens of its own candidate only
    (GLAM-style scoring, Carta et al. 2023). One forward pass per chunk of prompts, no KV cache to
    copy per candidate: 1.7x faster than scoring candidates against a replicated prompt cache, with
    or without grad (tiny preset, 16 ALFWorld prompts). Prompts are processed in chunks holding at
    most ``max_batch`` candidates. Differentiable when called with grad enabled (the policy gradient
    of ``choice`` mode).

    A packed row holds at most ``max_length`` tokens (default: the model's
    ``max_position_embeddings``): a prompt whose candidates do not fit beside it in one row is packed
    in several, each holding the prompt and the next candidates that fit, which scores every
    candidate as one row would. A candidate too long to fit beside its prompt alone is a ValueError.

    A prompt token attends to earlier prompt tokens only, so its state in the packed row is its state
    in the prompt alone: what a value head reads (PPO's critic), without a second forward pass.
    """
    rows = _row_groups(prompts, candidates, max_length or max_positions(model))
    scores: list[list[torch.Tensor]] = [[] for _ in prompts]
    states: list[torch.Tensor | None] = [None] * len(prompts)
    start = 0
    while start < len(rows):
        end, total = start, 0
        while end < len(rows) and (end == start or total + len(rows[end][1]) <= max_batch):
            total += len(rows[end][1])
            end += 1
        chunk = rows[start:end]
        lp, last = _score_packed(model, [prompts[b] for b, _ in chunk], [g for _, g in chunk], pad_id, score)
        for (b, _), row_lp, state in zip(chunk, lp, last, strict=True):
            scores[b].append(row_lp)
            if states[b] is None:  # the prompt's state is the same in each of its rows
                states[b] = state
        start = end
    return [parts[0] if len(parts) == 1 else torch.cat(parts) for parts in scores], torch.stack(states)


def packed_batch(
    prompts: Sequence[Sequence[int]], candidates: Sequence[Sequence[Sequence[int]]], pad_id: int
) -> dict:
    """Prompt + all of its candidates as one right-padded row, with a tree-shaped attention mask.

    Returns ``ids``, ``position_ids`` (candidate token k sits at prompt length + k, as if alone after
    its prompt), ``mask`` (B, 1, L, L) bool, and ``rows``/``cols``/``targets``: the position that
    predicts each candidate token (the prompt's last token for the first one) and the token itself.
    """
    seqs, segs, poss, rows, cols, targets = [], [], [], [], [], []
    for b, (prompt, cands) in enumerate(zip(prompts, candidates, strict=True)):
        seq, seg, pos = list(prompt), [0] * len(prompt), list(range(len(prompt)))
        for c, cand in enumerate(cands):
            first = len(seq)
            rows += [b] * len(cand)
            cols += [len(prompt) - 1, *range(first, first + len(cand) - 1)]
            targets += list(cand)
            seq += list(cand)
            seg += [c + 1] * len(cand)
            pos += range(len(prompt), len(prompt) + len(cand))
        seqs.append(seq)
        segs.append(seg)
        poss.append(pos)
    width = max(len(s) for s in seqs)
    ids = torch.full((len(seqs), width), pad_id, dtype=torch.long)
    seg = torch.full((len(seqs), width), -1, dtype=torch.long)  # -1 pad, 0 prompt, c+1 candidate c
    pos = torch.zeros((len(seqs), width), dtype=torch.long)
    for b, (s, g, p) in enumerate(zip(seqs, segs, poss, strict=True)):
        ids[b, : len(s)], seg[b, : len(s)], pos[b, : len(s)] = (
            torch.tensor(s),
            torch.tensor(g),
            torch.tensor(p),
        )
    key, query = seg[:, None, :], seg[:, :, None]
    mask = torch.ones(width, width, dtype=torch.bool).tril() & (key >= 0) & ((key == 0) | (key == query))
    mask |= torch.eye(width, dtype=torch.bool)  # padding rows see themselves: no all-masked (NaN) rows
    return {
        "ids": ids,
        "position_ids": pos,
        "mask": mask[:, None],
        "rows": torch.tensor(rows, dtype=torch.long),
        "cols": torch.tensor(cols, dtype=torch.long),
        "targets": torch.tensor(targets, dtype=torch.long),
    }


def head_logits(model, rows: torch.Tensor, cols: torch.Tensor, **inputs) -> tuple[torch.Tensor, torch.Tensor]:
    """(final hidden states (B, L, H), logits (N, V) at positions (rows, cols) only): the decoder trunk
    once, the vocabulary head only where a token is predicted. ``get_decoder()`` and
    ``get_output_embeddings()`` reach through peft wrappers, so LoRA models take the same path."""
    states = model.get_decoder()(**inputs).last_hidden_state
    return states, model.get_output_embeddings()(states[rows, cols])


def _score_packed(
    model, prompts, candidates, pad_id, score: ChoiceScore
) -> tuple[list[torch.Tensor], torch.Tensor]:
    device = next(model.parameters()).device
    batch = {k: v.to(device) for k, v in packed_batch(prompts, candidates, pad_id).items()}
    states, logits = head_logits(
        model,
        batch["rows"],
        batch["cols"],
        input_ids=batch["ids"],
        attention_mask=batch["mask"],
        position_ids=batch["position_ids"],
    )
    logits = logits.float()  # (N, V): only where a candidate token is predicted
    token_lp = logits.log_softmax(-1).gather(-1, batch["targets"][:, None]).squeeze(-1)  # (N,)
    lengths = torch.tensor([len(c) for cands in candidates for c in cands], device=device)
    owner = torch.repeat_interleave(torch.arange(len(lengths), device=device), lengths)  # token -> candidate
    seq_lp = token_lp.new_zeros(len(lengths)).index_add(0, owner, token_lp)  # (C_total,) summed per candidate
    if score == "mean":
        seq_lp = seq_lp / lengths  # (C_total,) mean token log-prob per candidate
    last = torch.tensor([len(p) - 1 for p in prompts], device=device)  # packed rows start with the prompt
    return list(torch.split(seq_lp, [len(c) for c in candidates])), states[torch.arange(len(prompts)), last]


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

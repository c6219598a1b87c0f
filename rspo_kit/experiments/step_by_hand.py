"""One step of ``choice`` mode taken by hand, in any env: what notebook 02 shows before ``rollout``
does the same for a whole group.

``score_candidates`` builds the prompt of an episode's current state and scores every candidate the
way a rollout does (``candidate_set``, ``candidate_logprobs`` with the policy's ``choice_score``);
``sample_action`` samples one from the softmax over the scores. A free-text template among the
candidates (WebShop's ``search[...]``) is scored as its prefix; when it is sampled the model writes
the text after it, exactly as in a rollout, so the env gets an action it can take.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

from rspo_kit.policy.prompts import EpisodeContext, build_prompt
from rspo_kit.policy.rollout import (
    SEARCH_TEMPLATE,
    Policy,
    RolloutConfig,
    _write_queries,  # the rollout's own query writer: a hand step and a rollout step write alike
    candidate_set,
)
from rspo_kit.policy.scoring import candidate_logprobs


@dataclass(frozen=True)
class CandidateScores:
    """The candidates of one state and the policy over them."""

    prompt: list[int]  # the prompt's token ids
    actions: list[str]  # what each candidate stands for (a template: its prefix is scored)
    candidates: list[list[int]]  # each candidate's token ids
    logprobs: torch.Tensor  # (K,) each candidate's score after the prompt (summed or mean token log-prob)
    probs: torch.Tensor  # (K,) softmax(logprobs / temperature): the sampling distribution
    temperature: float


def score_candidates(policy: Policy, context: EpisodeContext, temperature: float = 1.0) -> CandidateScores:
    """Prompt, candidates, their scores and the sampling distribution in ``context``'s current state."""
    prompt = build_prompt(context, policy.tokenizer, policy.prompt)
    actions, candidates = candidate_set(policy, context.admissible, context.instruction)
    pad = policy.tokenizer.pad_token_id
    with torch.no_grad():
        logprobs = candidate_logprobs(policy.model, [prompt], [candidates], pad, score=policy.choice_score)[0]
    probs = (logprobs / temperature).softmax(-1)
    return CandidateScores(prompt, actions, candidates, logprobs, probs, temperature)


def sample_action(policy: Policy, scores: CandidateScores, generator: torch.Generator) -> tuple[int, str]:
    """The index of the sampled candidate and the action to send the env: the candidate itself, or
    for a free-text template the text the model writes after its prefix (``search[<query>]``)."""
    k = int(torch.multinomial(scores.probs, 1, generator=generator))
    action = scores.actions[k]
    if action == SEARCH_TEMPLATE:
        choice = {"action": action, "action_ids": list(scores.candidates[k]), "logprob": 0.0}
        sampling = RolloutConfig(group_size=1, temperature=scores.temperature)
        _write_queries(policy, [scores.prompt + choice["action_ids"]], [choice], sampling, generator)
        action = choice["action"]
    return k, action

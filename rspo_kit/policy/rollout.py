"""The batched multi-turn rollout engine: a group of episodes per task, run to completion.

Every step makes one batched model call over all live episodes (``choice``: score every admissible
action; ``free``: sample a reply and parse it), then steps all envs together through the
``BatchRunner``, then drops finished episodes. Each step is recorded with what training needs later:
prompt ids, the chosen action's ids, behaviour log-probs, ``valid``, the env's progress before and
after, and the anchor of the state the action was taken in.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Literal

import torch

from rspo_kit.envs.base import Task
from rspo_kit.envs.batch import BatchRunner
from rspo_kit.policy.device import DeviceSpec, resolve_device
from rspo_kit.policy.models import ActionMode, load_model, preset_of
from rspo_kit.policy.prompts import EpisodeContext, PromptConfig, build_prompt, parse_action
from rspo_kit.policy.scoring import ChoiceScore, candidate_logprobs, generate
from rspo_kit.policy.tokenizer import IM_END


@dataclass
class Policy:
    """A model with its tokenizer, prompt settings and action mode."""

    model: torch.nn.Module
    tokenizer: object
    prompt: PromptConfig
    mode: ActionMode
    device: DeviceSpec
    search_query: str = "generate"  # choice mode: how a WebShop search gets its query (ModelPreset)
    # choice mode: a candidate's score is its summed or mean token log-prob (a run's policy.choice_score);
    # rollouts sample from the softmax over these scores and the policy gradient differentiates the same
    choice_score: ChoiceScore = "sum"

    @classmethod
    def load(cls, name: str, mode: ActionMode | None = None, seed: int = 0, device: str = "auto") -> Policy:
        spec = resolve_device(device)
        model, tokenizer = load_model(name, spec, seed=seed)
        preset = preset_of(name)
        prompt = PromptConfig(
            max_tokens=preset.max_prompt_tokens, show_actions=(mode or preset.action_mode) == "free"
        )
        return cls(model, tokenizer, prompt, mode or preset.action_mode, spec, preset.search_query)

    @property
    def end_ids(self) -> list[int]:
        """Tokens that end a reply: the chat turn end first (what the chat template writes), then EOS."""
        im_end = self.tokenizer.convert_tokens_to_ids(IM_END)
        ids = [im_end] if isinstance(im_end, int) and im_end != self.tokenizer.unk_token_id else []
        return [*ids, *([self.tokenizer.eos_token_id] if self.tokenizer.eos_token_id not in ids else [])]

    def encode_action(self, action: str) -> list[int]:
        """Token ids of a reply that is exactly ``action`` (plus the end-of-turn token)."""
        return self.tokenizer(action, add_special_tokens=False)["input_ids"] + self.end_ids[:1]


@dataclass
class Step:
    prompt_ids: list[int]
    action_ids: list[int]
    action: str
    logprob: float  # behaviour log-prob of the action (choice: log-softmax over candidates)
    token_logprobs: list[float]  # free: per reply token; choice: per token of the chosen candidate
    valid: bool
    anchor: str  # state in which the action was taken
    progress_before: dict
    progress_after: dict
    candidates: list[list[int]] | None = None  # choice mode: every candidate's ids
    chosen: int | None = None
    info: dict = field(default_factory=dict)


@dataclass
class Trajectory:
    task_id: str
    kind: str
    group_id: str  # task id + iteration: deterministic, never a uuid
    source: str  # "actor" or "explorer"
    steps: list[Step] = field(default_factory=list)
    won: bool = False
    score: float = 0.0
    crashed: bool = False

    @property
    def env_steps(self) -> int:
        return len(self.steps)


@dataclass(frozen=True)
class RolloutConfig:
    group_size: int = 8
    temperature: float = 1.0
    top_p: float = 1.0
    max_new_tokens: int = 24
    greedy: bool = False
    # choice mode: the share of choices taken uniformly among the candidates (an explorer's; the
    # recorded log-prob is the mixture's, log((1 - ε) softmax + ε / K))
    epsilon: float = 0.0

    def __post_init__(self) -> None:
        if self.group_size < 1:
            raise ValueError(f"RolloutConfig.group_size must be >= 1, got {self.group_size}")
        if self.temperature <= 0:
            raise ValueError(f"RolloutConfig.temperature must be > 0, got {self.temperature}")
        if not 0 < self.top_p <= 1:
            raise ValueError(f"RolloutConfig.top_p must be in (0, 1], got {self.top_p}")
        if not 0 <= self.epsilon < 1:
            raise ValueError(f"RolloutConfig.epsilon must be in [0, 1), got {self.epsilon}")
        if self.epsilon and self.greedy:
            raise ValueError(
                f"RolloutConfig.epsilon = {self.epsilon} mixes uniform choices into sampling: it needs greedy=False"
            )


def rollout(
    policy: Policy,
    runner: BatchRunner,
    tasks: Sequence[Task],
    cfg: RolloutConfig,
    *,
    iteration: int = 0,
    seed: int = 0,
    source: Literal["actor", "explorer"] = "actor",
    progress_bar: bool = False,
    timings: dict[str, float] | None = None,
) -> list[Trajectory]:
    """``cfg.group_size`` episodes per task, all stepped together; trajectories in task-major order.

    ``timings``, if given, accumulates seconds spent in ``prompt`` building, ``model`` calls and
    ``env`` steps (resets included), for throughput benchmarks.
    """
    import time

    from tqdm.auto import tqdm

    clock = timings if timings is not None else {}
    for key in ("prompt", "model", "env"):
        clock.setdefault(key, 0.0)
    tick = time.perf_counter()

    generator = torch.Generator().manual_seed(seed * 1_000_003 + iteration)
    episodes = [t for t in tasks for _ in range(cfg.group_size)]
    trajs = [Trajectory(t.id, t.kind, f"{t.id}@{iteration}", source) for t in episodes]
    contexts: dict[int, EpisodeContext] = {}
    infos: dict[int, dict] = {}
    first = runner.reset(episodes)
    clock["env"] += time.perf_counter() - tick
    for slot, obs in enumerate(first):
        if obs is None:
            trajs[slot].crashed = True
            continue
        contexts[slot] = EpisodeContext(episodes[slot].env, obs.instruction, obs.text, obs.admissible)
        infos[slot] = runner.reset_info.get(slot, {})
    bar = tqdm(total=len(episodes), desc=f"rollout {source}", disable=not progress_bar, leave=False)
    bar.update(len(episodes) - len(contexts))
    policy.model.eval()
    while contexts:
        slots = sorted(contexts)
        t0 = time.perf_counter()
        prompts = [build_prompt(contexts[s], policy.tokenizer, policy.prompt) for s in slots]
        t1 = time.perf_counter()
        with torch.no_grad():
            choices = _choose(policy, prompts, [contexts[s] for s in slots], cfg, generator)
        t2 = time.perf_counter()
        results = runner.step({s: c["action"] for s, c in zip(slots, choices, strict=True)})
        clock["prompt"] += t1 - t0
        clock["model"] += t2 - t1
        clock["env"] += time.perf_counter() - t2
        for s, prompt, c in zip(slots, prompts, choices, strict=True):
            res, before = results[s], infos.get(s, {})
            trajs[s].steps.append(
                Step(
                    prompt_ids=prompt,
                    action_ids=c["action_ids"],
                    action=c["action"],
                    logprob=c["logprob"],
                    token_logprobs=c["token_logprobs"],
                    valid=res.valid,
                    anchor=before.get("anchor", ""),
                    progress_before=before.get("progress", {}),
                    progress_after=res.info.get("progress", {}),
                    candidates=c.get("candidates"),
                    chosen=c.get("chosen"),
                    info={k: v for k, v in res.info.items() if k not in ("progress", "anchor")},
                )
            )
            if res.done:
                trajs[s].won, trajs[s].score = res.won, res.score
                trajs[s].crashed = bool(res.info.get("crashed"))
                del contexts[s]
                infos.pop(s, None)
                bar.update(1)
            else:
                contexts[s].advance(c["action"], res.obs.text, res.obs.admissible)
                infos[s] = res.info
    bar.close()
    return trajs


def _choose(policy: Policy, prompts, contexts, cfg: RolloutConfig, generator) -> list[dict]:
    if policy.mode == "choice":
        return _choose_candidates(policy, prompts, contexts, cfg, generator)
    if cfg.epsilon:
        raise ValueError(
            f"epsilon = {cfg.epsilon}: uniform choices need candidates, and this policy writes free text"
        )
    gen = generate(
        policy.model,
        prompts,
        policy.tokenizer.pad_token_id,
        policy.end_ids,
        max_new_tokens=cfg.max_new_tokens,
        temperature=cfg.temperature,
        top_p=cfg.top_p,
        greedy=cfg.greedy,
        generator=generator,
    )
    out = []
    for ids, lps in zip(gen.reply_ids, gen.logprobs, strict=True):
        text = policy.tokenizer.decode(ids, skip_special_tokens=True)
        out.append(
            {"action": parse_action(text), "action_ids": ids, "logprob": sum(lps), "token_logprobs": lps}
        )
    return out


SEARCH_TEMPLATE = "search[...]"


def candidate_set(
    policy: Policy, admissible: Sequence[str], instruction: str = ""
) -> tuple[list[str], list[list[int]]]:
    """The actions ``choice`` mode scores in a state, and their token ids.

    A free-text template (WebShop's ``search[...]``) enters as its prefix ``search[`` without an end
    token, and the query is generated after it; or, with ``policy.search_query == "instruction"``, as
    the whole action ``search[<instruction>]``. An empty admissible list yields the no-op ``look``.
    """
    actions = [a for a in admissible if a != SEARCH_TEMPLATE]
    cands = [policy.encode_action(a) for a in actions]
    if SEARCH_TEMPLATE in admissible:
        if policy.search_query == "instruction" and instruction.strip():
            query = " ".join(instruction.replace("[", " ").replace("]", " ").split())
            actions.append(f"search[{query}]")
            cands.append(policy.encode_action(actions[-1]))
        else:
            actions.append(SEARCH_TEMPLATE)
            cands.append(policy.tokenizer("search[", add_special_tokens=False)["input_ids"])
    if not actions:  # nothing admissible: a harmless no-op keeps the episode going
        actions, cands = ["look"], [policy.encode_action("look")]
    return actions, cands


def chosen_index(actions: Sequence[str], action: str) -> int | None:
    """Index of ``action`` among a candidate set, else None; any ``search[...]`` maps to the set's search."""
    if action.startswith("search["):
        return next((i for i, a in enumerate(actions) if a.startswith("search[")), None)
    return actions.index(action) if action in actions else None


def _choose_candidates(policy: Policy, prompts, contexts, cfg: RolloutConfig, generator) -> list[dict]:
    """GLAM-style choice over the admissible actions: a softmax over the candidates' scores
    (``policy.choice_score``: summed or mean token log-probs) at the rollout's temperature.

    A free-text action template (WebShop's ``search[...]``) enters as the candidate ``search[`` (its
    prefix, scored without an end token); when it is chosen the model writes the query itself, up to
    ``]``. Its behaviour log-prob is the candidate's log-softmax plus the query tokens' log-probs.
    """
    sets = [candidate_set(policy, ctx.admissible, ctx.instruction) for ctx in contexts]
    actions, cands = [a for a, _ in sets], [c for _, c in sets]
    pad_id = policy.tokenizer.pad_token_id
    seq_lp = candidate_logprobs(policy.model, prompts, cands, pad_id, score=policy.choice_score)
    out = []
    for acts, cand, lp in zip(actions, cands, seq_lp, strict=True):
        logp = (lp / cfg.temperature).log_softmax(-1)  # GLAM: a softmax over the candidates
        if cfg.epsilon:
            logp = epsilon_mixture(logp, cfg.epsilon)
        k = (
            int(logp.argmax())
            if cfg.greedy
            else int(torch.multinomial(logp.exp().cpu(), 1, generator=generator))
        )
        out.append(
            {
                "action": acts[k],
                "action_ids": cand[k],
                "logprob": float(logp[k]),
                "token_logprobs": [],
                "candidates": cand,
                "chosen": k,
            }
        )
    searches = [i for i, c in enumerate(out) if c["action"] == SEARCH_TEMPLATE]
    if searches:
        _write_queries(
            policy,
            [prompts[i] + out[i]["action_ids"] for i in searches],
            [out[i] for i in searches],
            cfg,
            generator,
        )
    return out


def epsilon_mixture(logp: torch.Tensor, epsilon: float) -> torch.Tensor:
    """Log-probs (K,) of the mixture (1 − ε)·p + ε/K of a categorical ``logp`` (K,) and the uniform.

    >>> import math
    >>> [round(math.exp(v), 3) for v in epsilon_mixture(torch.tensor([0.0, -30.0]), 0.2).tolist()]
    [0.9, 0.1]
    """
    if epsilon == 0:
        return logp
    uniform = torch.full_like(logp, math.log(epsilon / logp.numel()))
    return torch.logaddexp(logp + math.log1p(-epsilon), uniform)


def _write_queries(policy: Policy, prefixes, choices, cfg: RolloutConfig, generator) -> None:
    gen = generate(
        policy.model,
        prefixes,
        policy.tokenizer.pad_token_id,
        [*policy.end_ids, *_closing_bracket_ids(policy.tokenizer)],
        max_new_tokens=cfg.max_new_tokens,
        temperature=cfg.temperature,
        top_p=cfg.top_p,
        greedy=cfg.greedy,
        generator=generator,
    )
    for choice, ids, lps in zip(choices, gen.reply_ids, gen.logprobs, strict=True):
        text = policy.tokenizer.decode(ids, skip_special_tokens=True)
        query = " ".join(text.split("]", 1)[0].split())
        choice["action"] = f"search[{query}]"
        choice["action_ids"] = choice["action_ids"] + ids
        choice["token_logprobs"] = lps
        choice["logprob"] += sum(lps)


def _closing_bracket_ids(tokenizer) -> list[int]:
    """Every token whose text contains ``]``: any of them ends a query."""
    cached = getattr(tokenizer, "_rspo_bracket_ids", None)
    if cached is None:
        vocab = tokenizer.get_vocab()
        cached = sorted(i for i in vocab.values() if "]" in tokenizer.decode([i]))
        tokenizer._rspo_bracket_ids = cached
    return cached

"""Evaluate a policy on a fixed task list: success (and score) with 95% intervals, per task type, pass@k,
and every episode's outcome (``EvalResult.episodes``), so two policies can be compared task by task.

From the command line (a preset, a saved policy or a training run's actor): ``python -m rspo_kit.evaluate``.
"""

from __future__ import annotations

import math
from collections import defaultdict
from dataclasses import asdict, dataclass, field

from rspo_kit.envs.batch import BatchRunner
from rspo_kit.envs.registry import list_tasks
from rspo_kit.policy.rollout import Policy, RolloutConfig, rollout


def wilson_interval(successes: int, n: int, z: float = 1.96) -> tuple[float, float]:
    """95% Wilson score interval of a binomial proportion (sound at 0% and 100%, unlike the normal one).

    >>> [round(x, 3) for x in wilson_interval(0, 20)]
    [0.0, 0.161]
    """
    if n == 0:
        return (0.0, 1.0)
    p = successes / n
    centre = (p + z * z / (2 * n)) / (1 + z * z / n)
    half = z * math.sqrt(p * (1 - p) / n + z * z / (4 * n * n)) / (1 + z * z / n)
    return (max(0.0, centre - half), min(1.0, centre + half))


@dataclass
class EvalResult:
    env: str
    split: str
    mode: str  # action mode of the policy
    greedy: bool
    tasks: int
    samples_per_task: int
    success: float
    ci_low: float
    ci_high: float
    pass_at_k: float  # share of tasks with at least one success among their samples
    mean_score: float
    invalid_share: float
    mean_steps: float
    per_kind: dict[str, dict[str, float]]
    # one dict per episode, in task order: task_id, kind, sample (0..samples-1), won, score, steps
    episodes: list[dict] = field(default_factory=list)
    epsilon: float = 0.0  # the share of sampled choices uniform among the candidates

    def to_dict(self, episodes: bool = True) -> dict:
        d = asdict(self)
        return d if episodes else {k: v for k, v in d.items() if k != "episodes"}


def evaluate(
    policy: Policy,
    env: str,
    split: str = "eval",
    n: int | None = None,
    samples: int = 1,
    greedy: bool = True,
    seed: int = 0,
    n_workers: int = 2,
    max_steps: int | None = None,
    progress_bar: bool = True,
    env_kwargs: dict | None = None,
    epsilon: float = 0.0,
) -> EvalResult:
    """Success over ``samples`` rollouts of each of the first ``n`` tasks of ``split``. ``epsilon``
    (sampled, choice mode): a share of the choices uniform among the candidates, as an explorer with
    ``swap.explorer_epsilon`` samples."""
    if samples < 1:
        raise ValueError(f"samples must be >= 1, got {samples}")
    tasks = list_tasks(env, split=split, n=n)
    kwargs = dict(env_kwargs or {}) | ({} if max_steps is None else {"max_steps": max_steps})
    cfg = RolloutConfig(group_size=samples, greedy=greedy, epsilon=epsilon)
    with BatchRunner(env, n_workers=n_workers, env_kwargs=kwargs) as runner:
        trajs = rollout(policy, runner, tasks, cfg, seed=seed, iteration=0, progress_bar=progress_bar)
    by_task, by_kind = defaultdict(list), defaultdict(list)
    episodes = []
    for t in trajs:
        episodes.append(
            {
                "task_id": str(t.task_id),
                "kind": t.kind,
                "sample": len(by_task[t.task_id]),
                "won": bool(t.won),
                "score": float(t.score),
                "steps": int(t.env_steps),
            }
        )
        by_task[t.task_id].append(t.won)
        by_kind[t.kind].append(t.won)
    wins = sum(t.won for t in trajs)
    steps = sum(t.env_steps for t in trajs)
    low, high = wilson_interval(wins, len(trajs))
    return EvalResult(
        env=env,
        split=split,
        mode=policy.mode,
        greedy=greedy,
        epsilon=epsilon,
        tasks=len(tasks),
        samples_per_task=samples,
        success=wins / max(1, len(trajs)),
        ci_low=low,
        ci_high=high,
        pass_at_k=sum(any(v) for v in by_task.values()) / max(1, len(by_task)),
        mean_score=sum(t.score for t in trajs) / max(1, len(trajs)),
        invalid_share=sum(not s.valid for t in trajs for s in t.steps) / max(1, steps),
        mean_steps=steps / max(1, len(trajs)),
        per_kind={k: {"episodes": len(v), "success": sum(v) / len(v)} for k, v in sorted(by_kind.items())},
        episodes=episodes,
    )


def teacher_forced_accuracy(
    policy: Policy, env: str, split: str = "eval", n: int | None = 30, follow: str = "teacher"
) -> dict:
    """Per action verb: how often greedy ``choice`` picks the teacher's action in the teacher's states.

    Walks the SFT teacher (ALFWorld's search expert, else the env's own expert) through each task and
    scores every admissible action at every step, so it shows *which* decisions a warm start has not
    learned yet (e.g. ``take`` vs ``go``), independent of where the policy's own mistakes would lead.
    With ``follow="policy"`` the episode follows the policy's own greedy choices instead, and every
    step still counts whether the policy agreed with what the teacher would do there: the states a
    greedy evaluation actually visits (after its first mistake too), as in DAgger.
    ``prob`` is the mean probability that sampling (softmax over the candidates' scores, temperature 1)
    takes the teacher's action: a verb the policy never saw demonstrated can sit at 1e-12, where no
    sampled rollout, an explorer's included, will ever try it.
    Returns ``{verb: {"right": k, "steps": m, "prob": p}, ..., "overall": accuracy}``, keyed by the
    teacher's verb.
    """
    import torch

    from rspo_kit.envs.registry import make_env
    from rspo_kit.policy.prompts import EpisodeContext, build_prompt
    from rspo_kit.policy.rollout import candidate_set, chosen_index
    from rspo_kit.policy.scoring import candidate_logprobs
    from rspo_kit.policy.sft import _teacher, _verb

    if policy.mode != "choice":
        raise ValueError("teacher_forced_accuracy scores candidates: it needs a choice-mode policy")
    if follow not in ("teacher", "policy"):
        raise ValueError(f"follow must be 'teacher' or 'policy', got {follow!r}")
    game, teacher = make_env(env), _teacher(env)
    counts: dict[str, dict[str, int]] = defaultdict(lambda: {"right": 0, "steps": 0})
    probs: dict[str, float] = defaultdict(float)  # summed over the verb's steps
    for task in list_tasks(env, split=split, n=n):
        obs = game.reset(task)
        ctx = EpisodeContext(env, obs.instruction, obs.text, obs.admissible)
        for _ in range(100):
            action = teacher(ctx) if teacher else game.expert_action()
            actions, cands = candidate_set(policy, ctx.admissible, ctx.instruction)
            k = chosen_index(actions, action) if action else None
            if k is None and follow == "teacher":
                break
            with torch.no_grad():
                lp = candidate_logprobs(
                    policy.model,
                    [build_prompt(ctx, policy.tokenizer, policy.prompt)],
                    [cands],
                    policy.tokenizer.pad_token_id,
                    score=policy.choice_score,
                )[0]
            verb = _verb(action) if action else "none"
            counts[verb]["steps"] += 1
            counts[verb]["right"] += int(lp.argmax()) == k
            probs[verb] += float(lp.softmax(-1)[k]) if k is not None else 0.0
            if follow == "policy":
                action = actions[int(lp.argmax())]
            res = game.step(action)
            if res.done:
                break
            ctx.advance(action, res.obs.text, res.obs.admissible)
    steps = sum(c["steps"] for c in counts.values())
    verbs = {verb: {**c, "prob": probs[verb] / c["steps"]} for verb, c in counts.items()}
    return {**verbs, "overall": sum(c["right"] for c in counts.values()) / max(1, steps)}

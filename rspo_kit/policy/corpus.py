"""The text the tiny tokenizers are trained on: what the environments actually say.

Episodes on train tasks, driven by the expert with random detours (so observations of opened,
emptied and revisited receptacles appear too), give instructions, observations and admissible
actions; the prompt template's own words are added so that every prompt tokenizes compactly.
"""

from __future__ import annotations

import random

from rspo_kit.envs.base import Observation
from rspo_kit.envs.batch import BatchRunner
from rspo_kit.envs.play import play
from rspo_kit.envs.registry import list_tasks


def detour_policy(p_random: float, seed: int):
    """The expert, except that with probability ``p_random`` a random admissible action is taken."""
    rng = random.Random(seed)

    def choose(runner: BatchRunner, obs: dict[int, Observation]) -> dict[int, str]:
        expert = runner.expert(list(obs))
        return {
            s: rng.choice(o.admissible)
            if (rng.random() < p_random or not expert[s]) and o.admissible
            else expert[s]
            for s, o in obs.items()
        }

    return choose


def env_corpus(
    env: str, n_tasks: int = 40, p_random: float = 0.3, max_steps: int = 20, seed: int = 0
) -> list[str]:
    """Texts seen in ``n_tasks`` train episodes of ``env``: instructions, observations, admissible actions."""
    tasks = list_tasks(env, split="train", n=n_tasks)
    texts: list[str] = []
    with BatchRunner(env, n_workers=2, env_kwargs={"max_steps": max_steps}) as runner:
        first = runner.reset(tasks)
        texts += [o.instruction for o in first if o is not None]
        texts += [" ".join(o.admissible) for o in first if o is not None]
        for ep in play(runner, tasks, detour_policy(p_random, seed), progress_bar=False):
            texts += ep.feedback + ep.actions
    return texts

"""Named run configurations: what tests, notebooks and the CLI share, and the experiment protocols of
``results/`` with the research notes behind their numbers.

``preset(name, env=..., algo=..., swap=..., seed=...)`` builds the ``RunConfig`` (``rspo_kit.train.config``)
of a ``PRESETS`` entry under a variant (``VARIANTS``); ``from_parameters`` builds it from a notebook's
parameters. Why each protocol's budget, learning rate and warm start: the notes beside it and
docs/training.md ("Presets").
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any, get_type_hints

from rspo_kit.paths import warm_start_policy
from rspo_kit.train.config import VARIANTS, Algo, RunConfig
from rspo_kit.train.fields import parse_field


def _protocol_train(max_env_steps: int, eval_every: int) -> dict[str, Any]:
    """What every experiment protocol shares: runs end at an env-step budget; learning curves on 40
    valid tasks (never tune on the test splits); at the end all 120 tasks of eval and eval_unseen,
    greedy and sampled; one torch thread, so parallel cells do not fight over the cores."""
    return {
        "iterations": 1000,  # never the limit: max_env_steps ends every run
        "max_env_steps": max_env_steps,
        "eval_split": "valid",
        "eval_n": 40,
        "eval_every": eval_every,
        "final_eval_split": "eval,eval_unseen",
        "final_eval_n": 120,
        "final_eval_sampled": True,
        "threads": 1,
    }


def _alfworld_protocol(warm_start: str, **policy: Any) -> dict[str, dict[str, Any]]:
    """The ALFWorld protocol (``alfworld-40k``, the notes beside it): 40,000 env steps, lr 3e-5,
    episodes capped at 30 steps, from the tiny model's warm start ``warm_start`` of 1,536 SFT updates
    under that cap; ``policy`` adds to how that warm start was made."""
    return {
        "env": {"name": "alfworld", "train_tasks": 400, "tasks_per_iteration": 8, "max_steps": 30},
        "policy": {
            "preset": "tiny",
            "sft_updates": 1536,
            **policy,
            "warmstart_from": warm_start_policy(warm_start),
        },
        "algo": {"group_size": 8, "lr": 3e-5, "minibatch_steps": 64},
        "train": _protocol_train(max_env_steps=40_000, eval_every=5),
    }


# Named presets: what tests, notebooks and the CLI share. "tiny" runs on a 2-core CPU in minutes.
PRESETS: dict[str, dict[str, dict[str, Any]]] = {
    "tiny": {
        "env": {"train_tasks": 400, "tasks_per_iteration": 8},
        "policy": {"preset": "tiny", "sft_minutes": 10.0},
        "algo": {"group_size": 8, "lr": 1e-4, "minibatch_steps": 64},
        "train": {"iterations": 10, "eval_n": 30, "eval_every": 5},
    },
    # tiny's run on the larger scratch model (policy.models' "small": 6 layers, hidden size 256)
    "small": {
        "env": {"train_tasks": 400, "tasks_per_iteration": 8},
        "policy": {"preset": "small", "sft_minutes": 10.0},
        "algo": {"group_size": 8, "lr": 1e-4, "minibatch_steps": 64},
        "train": {"iterations": 10, "eval_n": 30, "eval_every": 5},
    },
    # seconds-long runs for tests and CI notebooks: no warm start, short episodes, tiny groups
    "smoke": {
        "env": {"train_tasks": 8, "tasks_per_iteration": 2, "max_steps": 6},
        "policy": {"preset": "tiny", "warmstart": False},
        "algo": {"group_size": 2, "minibatch_steps": 16},
        # the paper's loop at the smallest batch that replays: 1 on-policy task x 2 + 2 replayed, k = 2;
        # group_mixing: M = 1 replayed per group of 2
        "swap": {"loop_steps": 2, "offpolicy_share": 0.5, "explorer_group_size": 2, "replay_ratio": 0.5},
        "train": {"iterations": 2, "eval_n": 2, "eval_every": 1, "progress_bar": False},
    },
    "gpu": {  # a real instruction-tuned model with LoRA, for GPU users (nothing is downloaded)
        "policy": {"preset": "Qwen/Qwen2.5-1.5B-Instruct", "warmstart": False, "mode": "free"},
        "env": {"train_tasks": 3000, "tasks_per_iteration": 16, "n_workers": 8},
        "algo": {"group_size": 8, "lr": 1e-6, "minibatch_steps": 32},
        # the paper's 150 updates of A (50 loops of k = 3 under RSPO, 150 iterations of plain X)
        "train": {"iterations": 1000, "updates": 150, "eval_n": 120, "eval_every": 10},
    },
    # The experiment protocols of results/: the tiny model from a committed warm start, every run
    # stopped at one budget of env steps (actor + explorer; RSPO and the control pay for their explorer),
    # learning curves on 40 valid tasks (held-out train tasks: the lr was tuned there, never on the test
    # splits) every 5 iterations, then all 120 tasks of eval and eval_unseen, greedy and sampled (RL
    # optimises the sampled policy). One torch thread: a run repeats on a machine of the same kind.
    # ALFWorld: 40,000 env steps (a budget at which plain GRPO measurably improves on its warm start on
    # the 120-task splits), lr 3e-5 (tuned on valid from this warm start), episodes capped at 30 steps,
    # success as the outcome; the warm start is 1,536 SFT updates under the same cap (what 10 minutes
    # gave on 2 cores, as a count: the same schedule on any machine; data/warm_starts/README.md).
    "alfworld-40k": _alfworld_protocol("alfworld_tiny_sft1536_cap30"),
    # The hard regime on ALFWorld, where RSPO's first precondition holds: alfworld-40k (budget, lr, cap,
    # evaluations) from a warm start that has never seen two of the six task kinds, so that its groups on
    # them fail every time (a third of the groups: RL trains on all six, and the evaluations cover all six,
    # reported apart by ``report --by-kind``). Left out are the two kinds the alfworld-40k warm start is
    # best at, sampled on the 240 valid tasks (2 episodes each; the warm start's kind_choice/):
    # look_at_obj_in_light 48.8%, then pick_heat_then_place_in_recep and pick_and_place_simple at 47.5%,
    # of which heat has more tasks won at least once (75% vs 68%); clean 33.8%, cool 36.3%, pick_two 5.0%.
    # The kinds this model learns best from demonstrations are the ones RL can plausibly reach without
    # them; leaving out one it fails when shown (pick_two) would measure nothing. Both need a verb no other
    # kind demonstrates ("use" a desklamp, "heat" with a microwave), so the start cannot finish them by
    # chance, yet their other steps (go to, take, open, move) are the seen kinds' own, which an explorer
    # can build on. The start they give wins none of those two kinds' 2 x 40 test tasks, greedy or
    # sampled, and 36% (greedy) of the other four's (the README beside it). The explorer setting is the
    # config default; the regime map says which to run.
    "alfworld-hard": _alfworld_protocol(
        "alfworld_tiny_sft1536_cap30_no_look_heat",
        sft_exclude_kinds=("look_at_obj_in_light", "pick_heat_then_place_in_recep"),
    ),
    # WebShop: 7,000 env steps (plain GRPO's best valid evaluation came at 6.7k and fell after: chosen
    # on valid, on plain GRPO's own curve), lr 1e-4 (tuned on valid for GRPO), partial credit (score /
    # 100) as the outcome, since full successes are rare for the tiny model, and the replay of explorer
    # episodes above their group's mean score; the warm start is 1,284 SFT updates under the 15-step cap.
    "webshop-7k": {
        "env": {"name": "webshop", "train_tasks": 400, "tasks_per_iteration": 8, "max_steps": 15},
        "policy": {
            "preset": "tiny",
            "sft_updates": 1284,
            "warmstart_from": warm_start_policy("webshop_tiny_sft1284_cap15"),
        },
        "reward": {"outcome_mode": "score"},
        "swap": {"replay_filter": "outcome_above_mean"},
        "algo": {"group_size": 8, "lr": 1e-4, "minibatch_steps": 64},
        "train": _protocol_train(max_env_steps=7_000, eval_every=5),
    },
    # The chain testbed (rspo_kit.envs.chain), where RSPO's two mechanisms have room to act: groups where
    # a weak start fails every time (for the explorer's successes to rescue) and a lever that
    # reward.misalign_eps pays for (a dense reward to be protected from). Difficulty is the slack of the
    # episode cap on chain-4x2 (sweeps: env.name chain-4x2, chain-4x2-cap10, chain-4x2-cap8; the expert
    # needs 8 steps): the start's sampled success 38% / 24% / 8%, so that a group of 8 fails every time
    # in 2% / 11% / 51% of groups. The start knows the task but is unsure of it: 1,200 SFT updates on
    # chain-4x2's demonstrations with half the labels made random (policy.sft_label_noise 0.5) copy the
    # clue (greedy success 98%) yet put only about 0.6 on a right action (benchmarks/testbed_start.py).
    # It is one warm start for every level (policy.sft_env): the same noisy SFT on longer chains or more
    # doors has not yet learnt to copy the clue by 1,200 updates (chain-6x3: greedy 2.5%), and neither
    # have fewer clean updates (200: sampled 10% / 0.8% / 0% on chain-4x2 / 6x3 / 8x4), from which no
    # variant learnt in 12k env steps. lr 1e-3: plain GRPO on chain-4x2-cap10 went from 12% to 81% rollout
    # success in 4k env steps (3e-4: to 50%).
    "chain-4k": {
        "env": {"name": "chain-4x2", "train_tasks": 400, "tasks_per_iteration": 8},
        "policy": {
            "preset": "tiny",
            "sft_env": "chain-4x2",
            "sft_updates": 1200,
            "sft_demo_tasks": 300,
            "sft_label_noise": 0.5,
            "warmstart_from": warm_start_policy("chain4x2_tiny_sft1200_noise05"),
        },
        "algo": {"group_size": 8, "lr": 1e-3, "minibatch_steps": 64},
        "train": _protocol_train(max_env_steps=4_000, eval_every=3),
    },
}


def preset(
    name: str = "tiny",
    *,
    env: str | None = None,
    algo: Algo = "gigpo",
    swap: bool | str = False,
    seed: int = 0,
    **overrides: Any,
) -> RunConfig:
    """A named ``RunConfig``. ``swap``: True/"rspo", False/"plain", "control", "process", "mix" or
    "group_mixing" (the earlier design, with the truncated importance weights it ran with).

    ``env``: None is the preset's own env (a protocol such as "alfworld-40k" fixes its env; another is
    an error), else "alfworld". ``overrides`` are dotted fields with ``__`` for the dot:
    ``preset("tiny", algo__lr=3e-4)``.
    """
    if name not in PRESETS:
        raise ValueError(f"unknown preset {name!r}; choose one of {sorted(PRESETS)}")
    fixed = PRESETS[name].get("env", {}).get("name")
    if fixed is not None and env not in (None, fixed):
        raise ValueError(
            f"preset {name!r} fixes its env to {fixed!r}; env={env!r} is not allowed (leave it None)"
        )
    env = env or fixed or "alfworld"
    variant = {True: "rspo", False: "plain"}.get(swap, swap) if isinstance(swap, bool) else swap
    if variant not in VARIANTS:
        raise ValueError(f"swap = {swap!r} is not allowed; choose True, False or one of {sorted(VARIANTS)}")
    parts = {section: dict(values) for section, values in PRESETS[name].items()}
    parts.setdefault("env", {})["name"] = env
    parts.setdefault("algo", {})["name"] = algo
    parts.setdefault("train", {})["seed"] = seed
    cfg = RunConfig.from_dict(parts)
    cfg.swap.mode, cfg.reward.train_on = VARIANTS[variant]
    if variant == "group_mixing":
        cfg.swap.offpolicy_clip = "truncated_is"
    for key, value in overrides.items():
        cfg.override(key.replace("__", "."), value)
    return cfg.validate()


# Notebook 04's parameters that name a setting, and the config field each one is: the one table of these
# UPPERCASE names (papermill parameters are Python identifiers, so a dotted field cannot be one).
# ENV, ALGO and VARIANT choose the preset (``preset``); the others set their field (``PARAMETER_FIELDS``);
# any other field goes in ``OVERRIDES`` under its dotted name. Sweeps read these names as the fields
# they stand for (``rspo_kit.experiments.grid``).
NOTEBOOK_PARAMETERS = {
    "ENV": "env.name",
    "ALGO": "algo.name",
    "VARIANT": "variant",
    "ENV_MODULE": "env.module",
    "SEED": "train.seed",
    "ITERATIONS": "train.iterations",
    "THREADS": "train.threads",
    "RUN_DIR": "train.run_dir",
    "INTERACTIVE": "train.progress_bar",
}
PRESET_PARAMETERS = ("ENV", "ALGO", "VARIANT")
# the config fields among them: papermill passes them typed (``-p``) or as text (``-r``); None or ""
# keeps the preset's value
PARAMETER_FIELDS = {p: field for p, field in NOTEBOOK_PARAMETERS.items() if p not in PRESET_PARAMETERS}


def from_parameters(parameters: Mapping[str, Any]) -> RunConfig:
    """A notebook's parameters as its validated ``RunConfig``; a wrong one is a ValueError naming it.

    ``PRESET``, ``ENV``, ``ALGO`` and ``VARIANT`` choose the preset (``preset``); the parameters of
    ``PARAMETER_FIELDS`` set their fields; ``OVERRIDES`` (a dict of dotted fields, or its JSON text as
    ``papermill -p`` passes it) comes last. Each value goes through the checks of the CLI's overrides.

    >>> from_parameters({"PRESET": "smoke", "ITERATIONS": 3, "OVERRIDES": '{"algo.lr": 2e-4}'}).algo.lr
    0.0002
    >>> from_parameters({"PRESET": "smoke", "SEED": 1.5})
    Traceback (most recent call last):
    ValueError: SEED = 1.5 (train.seed): must be an integer
    """
    p = dict(parameters)
    name = p.get("PRESET", "tiny")
    cfg = preset(name, env=p.get("ENV"), algo=p.get("ALGO", "gigpo"), swap=p.get("VARIANT", False))
    for parameter, dotted in PARAMETER_FIELDS.items():
        value = p.get(parameter)
        if value is None or (isinstance(value, str) and not value):
            continue
        part, field_name = cfg._field(dotted)
        try:
            setattr(part, field_name, parse_field(dotted, value, get_type_hints(type(part))[field_name]))
            part.__post_init__()
        except ValueError as err:
            what = str(err).partition(": must be ")[2]
            raise ValueError(
                f"{parameter} = {value!r} ({dotted}): must be {what}" if what else str(err)
            ) from None
    overrides = p.get("OVERRIDES") or {}
    if isinstance(overrides, str):
        try:
            overrides = json.loads(overrides)
        except json.JSONDecodeError as err:
            raise ValueError(f"OVERRIDES = {overrides!r}: not JSON ({err})") from None
    if not isinstance(overrides, Mapping):
        raise ValueError(
            f'OVERRIDES = {overrides!r}: must be a dict of dotted config fields, e.g. {{"algo.lr": 3e-5}}'
        )
    for key, value in overrides.items():
        cfg.override(key, value)
    return cfg.validate()

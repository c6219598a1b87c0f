"""Chain testbed: any string is an action, the step cap, the expert, splits, progress, anchors, rewards."""

from __future__ import annotations

import random

import pandas as pd
import pytest
from env_checks import step_checked
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from processes import fresh_python

from rspo_kit.envs import EpisodeOverError, list_tasks, make_env, registered_envs
from rspo_kit.envs.chain import BUILTIN_LEVELS, HELD_OUT_PAIRS, LEVELS, ChainLevel, register_chain
from rspo_kit.envs.registry import valid_start
from rspo_kit.rewards import diagnose, misalign, process_reward

LEVEL = "chain-6x3"
SPLITS = ("train", "eval", "eval_unseen")


def _play(env, task, choose) -> list[tuple[dict, str, object]]:
    """(progress before, action, result) of every step of one episode."""
    env.reset(task)
    steps, before = [], env.info["progress"]
    while not env.done:
        action = choose(env)
        res = env.step(action)
        steps.append((before, action, res))
        before = res.info["progress"]
    return steps


def _held_out_pair_in(colours) -> bool:
    return any(a in colours and b in colours for a, b in HELD_OUT_PAIRS)


# ----------------------------------------------------------------------------------------- the world


def test_doors_clue_lever_and_regress():
    task = list_tasks(LEVEL, split="eval", n=1)[0]
    env = make_env(LEVEL)
    obs = env.reset(task)
    colours, windy = task.meta["doors"][0], task.meta["windy"][0]
    assert obs.text == f"Room 1 of 6. Doors: {', '.join(colours)}."
    assert obs.admissible == ("listen", "pull lever", *(f"open {c} door" for c in colours))
    assert windy not in obs.text.replace(f"Doors: {', '.join(colours)}", "")  # the way on is not shown
    assert env.step("listen").obs.text == f"Wind blows from the {windy} door."
    res = env.step("Open  " + windy.upper() + " door")  # lower-cased and whitespace-collapsed
    assert res.valid and res.obs.text.startswith(f"You pass the {windy} door. Room 2 of 6.")
    wrong = next(c for c in task.meta["doors"][1] if c != task.meta["windy"][1])
    res = env.step(f"open {wrong} door")
    assert res.valid and res.obs.text.startswith(f"The {wrong} door leads back to the start. Room 1 of 6.")
    assert res.info["progress"]["room"] == 1 and not res.done
    assert env.step("pull lever").obs.text == "The lever clicks."


def test_step_cap_ends_in_failure_and_stepping_after_the_end_raises():
    env, task = make_env(LEVEL, max_steps=3), list_tasks(LEVEL, split="eval", n=1)[0]
    env.reset(task)
    results = [env.step(a) for a in ("pull lever", "dance", "pull lever")]
    assert [r.done for r in results] == [False, False, True]
    assert not results[-1].won and results[-1].score == 0.0 and results[-1].info["timeout"]
    with pytest.raises(EpisodeOverError):
        env.step("listen")
    assert env.expert_action() is None and env.admissible_actions() == []
    assert make_env(LEVEL).max_steps == 18  # the level's cap: 3 steps a room
    with pytest.raises(ValueError, match="max_steps"):
        make_env(LEVEL, max_steps=0)


@pytest.mark.parametrize("level", BUILTIN_LEVELS)
@pytest.mark.parametrize("split", SPLITS)
def test_expert_wins_every_task_of_every_split_in_two_steps_a_room(level, split):
    env = make_env(level)
    for task in list_tasks(level, split=split):
        steps = _play(env, task, lambda e: e.expert_action())
        assert steps[-1][2].won and steps[-1][2].score == 1.0, task.id
        assert len(steps) == 2 * LEVELS[level].length <= env.max_steps
        assert all(res.valid for _, _, res in steps)


def test_expert_recovers_from_detours():
    env, rng = make_env(LEVEL, max_steps=200), random.Random(0)
    for task in list_tasks(LEVEL, split="eval_unseen", n=20):
        steps = _play(
            env,
            task,
            lambda e: rng.choice(e.admissible_actions()) if rng.random() < 0.3 else e.expert_action(),
        )
        assert steps[-1][2].won, task.id


# ---------------------------------------------------------------------------------------------- bad input

_garbage = st.one_of(
    st.text(max_size=40),
    st.sampled_from(
        ["", " ", "\x00", "open", "open door", "open  door", "open red", "door", "lever", "pull"]
    ),
    st.text(max_size=12).map(lambda s: f"open {s} door"),
    st.sampled_from(["open orange door", "open red door door", "listen now", "pull lever twice"]),
)
_known = st.sampled_from(
    ["listen", "pull lever", "LISTEN", " pull   lever ", "pick:0", "pick:1", "pick:2", "expert"]
)


@settings(max_examples=80, deadline=None, suppress_health_check=list(HealthCheck), derandomize=True)
@given(st.lists(st.one_of(_garbage, _known), min_size=1, max_size=30), st.sampled_from(BUILTIN_LEVELS))
def test_any_string_is_a_legal_action(actions, level):
    env = make_env(level)
    env.reset(list_tasks(level, split="eval", n=1)[0])
    for action in actions:
        if action.startswith("pick:"):  # the k-th door of the room at hand
            doors = [a for a in env.admissible_actions() if a.startswith("open ")]
            action = doors[int(action[5:]) % len(doors)]
        elif action == "expert":
            action = env.expert_action()
        before, admissible, steps = env.info, env.admissible_actions(), env.steps
        res = env.step(action)
        assert env.steps == steps + 1 and isinstance(res.obs.text, str)
        assert res.valid == (" ".join(action.lower().split()) in admissible)  # exactly the listed actions
        if not res.valid:
            assert res.obs.text == "Nothing happens." and res.score == 0.0 and not res.won
            assert res.info["progress"] == before["progress"] and res.info["anchor"] == before["anchor"]
        assert res.done == (res.won or env.steps >= env.max_steps)
        if res.done:
            assert env.steps <= env.max_steps
            break


# ---------------------------------------------------------------------------------------------- splits


def test_splits_are_deterministic_sized_and_disjoint():
    for level in BUILTIN_LEVELS:
        tasks = {s: list_tasks(level, split=s) for s in SPLITS}
        assert {s: len(t) for s, t in tasks.items()} == {"train": 3000, "eval": 120, "eval_unseen": 120}
        content = {s: {(t.meta["doors"], t.meta["windy"]) for t in ts} for s, ts in tasks.items()}
        assert not content["train"] & content["eval"] and not content["train"] & content["eval_unseen"]
        assert len({t.id for ts in tasks.values() for t in ts}) == 3240
        valid = list_tasks(level, split="valid")
        assert valid == tasks["train"][valid_start(level) :] and len(valid) == 240
    from rspo_kit.envs.chain.levels import _task  # a fresh draw, not the cached split

    assert _task(LEVELS[LEVEL], "eval", 7) == list_tasks(LEVEL, split="eval")[7]
    assert _task(LEVELS[LEVEL], "eval", 7).meta == list_tasks(LEVEL, split="eval")[7].meta
    with pytest.raises(ValueError, match="split"):
        list_tasks(LEVEL, split="test")


@pytest.mark.parametrize("level", BUILTIN_LEVELS)
def test_eval_unseen_puts_the_way_on_behind_colour_pairs_train_never_shows(level):
    for split in ("train", "eval"):
        for task in list_tasks(level, split=split):
            assert not any(_held_out_pair_in(room) for room in task.meta["doors"]), task.id
    for task in list_tasks(level, split="eval_unseen"):
        for room, windy in zip(task.meta["doors"], task.meta["windy"], strict=True):
            pair = next(p for p in HELD_OUT_PAIRS if windy in p)
            assert set(pair) <= set(room), task.id
    # every colour still opens doors in train (unseen are the pairs, not the words)
    train_windy = {w for t in list_tasks(level, split="train") for w in t.meta["windy"]}
    unseen_windy = {w for t in list_tasks(level, split="eval_unseen") for w in t.meta["windy"]}
    assert unseen_windy <= train_windy


def test_levels_resolve_by_name_and_knobs_are_checked():
    assert {"chain-4x2", "chain-6x3", "chain-8x4"} <= set(registered_envs())
    task = list_tasks("chain-3x4", split="eval", n=1)[0]  # any chain-<length>x<doors> resolves
    assert task.env == "chain-3x4" and len(task.meta["doors"]) == 3 and len(task.meta["doors"][0]) == 4
    assert register_chain(3, 2, max_steps=7) == "chain-3x2-cap7" and make_env("chain-3x2-cap7").max_steps == 7
    for bad in ({"length": 0, "doors": 2}, {"length": 3, "doors": 1}, {"length": 3, "doors": 5}):
        with pytest.raises(ValueError, match="ChainLevel"):
            ChainLevel(**bad)
    with pytest.raises(KeyError, match="unknown env"):
        make_env("chain-x")
    # a level of 48 possible tasks repeats tasks within train, never one of eval
    small = {
        s: {(t.meta["doors"], t.meta["windy"]) for t in list_tasks("chain-1x2", split=s)} for s in SPLITS
    }
    assert len(small["train"]) < 48 and not small["train"] & small["eval"]


# ------------------------------------------------------------------------------------- progress, anchor


def test_progress_and_anchor_follow_room_and_clue_only():
    task = list_tasks(LEVEL, split="eval", n=1)[0]
    env = make_env(LEVEL)
    env.reset(task)
    start = env.info
    assert start["progress"] == {
        "room": 1, "rooms": 6, "heard": 0, "lever_pulls": 0, "subgoals_done": 0, "subgoals_total": 6
    }  # fmt: skip
    pulled = env.step("pull lever").info
    assert pulled["progress"]["lever_pulls"] == 1 and pulled["anchor"] == start["anchor"]  # history-free
    heard = env.step("listen").info
    assert heard["progress"]["heard"] == 1 and heard["anchor"] != start["anchor"]
    on = env.step(f"open {task.meta['windy'][0]} door").info
    assert on["progress"]["room"] == 2 and on["progress"]["subgoals_done"] == 1
    assert on["progress"]["heard"] == 0  # the clue was about room 1
    wrong = next(c for c in task.meta["doors"][1] if c != task.meta["windy"][1])
    back = env.step(f"open {wrong} door").info
    assert back["progress"]["subgoals_done"] == 0 and back["anchor"] == start["anchor"]
    assert back["progress"]["lever_pulls"] == 1  # pulls count over the episode
    assert all(isinstance(v, int) and not isinstance(v, bool) for v in back["progress"].values())
    for windy in task.meta["windy"]:
        env.step("listen")
        last = env.step(f"open {windy} door")
    assert last.won and last.info["progress"]["subgoals_done"] == 6 and last.info["anchor"] == "escaped"


# ---------------------------------------------------------------------------------------------- rewards


def _mixed_batch(level: str, n_tasks: int, seed: int = 0) -> list[tuple[int, list]]:
    """(task index, steps) of random, expert, detouring-expert and lever-pulling episodes on each task."""
    rng = random.Random(seed)
    env = make_env(level)
    policies = {
        "expert": lambda e: e.expert_action(),
        "detours": lambda e: rng.choice(e.admissible_actions()) if rng.random() < 0.2 else e.expert_action(),
        "random": lambda e: rng.choice(e.admissible_actions()),
        "lever": lambda e: "pull lever" if rng.random() < 0.8 else rng.choice(e.admissible_actions()),
    }
    return [
        (i, _play(env, task, policy))
        for i, task in enumerate(list_tasks(level, split="train", n=n_tasks))
        for name in ("expert", "detours", "random", "random", "lever", "lever")
        for policy in [policies[name]]
    ]


def _steps_frame(batch, reward) -> pd.DataFrame:
    rows = []
    for traj, (group, steps) in enumerate(batch):
        outcome = float(steps[-1][2].won)
        for t, (before, action, res) in enumerate(steps):
            r = reward(before, res.info["progress"], action, res.valid, res.info)
            rows.append(
                {"group_id": group, "traj_id": traj, "step": t, "process_reward": r, "outcome": outcome}
            )
    return pd.DataFrame(rows)


def test_subgoal_return_is_final_minus_initial_progress_and_hack_counts_pulls():
    subgoal, hack = process_reward("subgoal", env=LEVEL), process_reward("hack", env=LEVEL)
    for _, steps in _mixed_batch(LEVEL, 10):
        last = steps[-1][2]
        total = sum(subgoal(b, r.info["progress"], a, r.valid, r.info) for b, a, r in steps)
        assert total == pytest.approx(last.info["progress"]["subgoals_done"] / 6)
        assert total == pytest.approx(1.0) if last.won else total < 1
        pulls = sum(hack(b, r.info["progress"], a, r.valid, r.info) for b, a, r in steps)
        assert pulls == pytest.approx(sum(a == "pull lever" for _, a, _ in steps) / 6)
    assert sum(step[2].info["progress"]["subgoals_done"] < step[0]["subgoals_done"] for _, s in
               _mixed_batch(LEVEL, 3) for step in s) > 0  # regress happens, and it pays back  # fmt: skip


def test_misalign_eps_lowers_rank_agreement_and_raises_hacking():
    batch = _mixed_batch(LEVEL, 12)
    taus, rates = [], []
    for eps in (0.0, 0.1, 0.5, 1.0):
        report = diagnose(_steps_frame(batch, misalign(eps, env=LEVEL)))
        taus.append(report.rank_agreement.mean_tau)
        rates.append(report.hacking.rate)
    assert taus == sorted(taus, reverse=True) and taus[0] > 0.6 and taus[-1] < 0, taus
    assert rates == sorted(rates) and rates[0] == 0.0 and rates[-1] > 0.9, rates
    # eps = 0 is exactly the subgoal reward, eps = 1 exactly the hack
    step = ({"subgoals_done": 1, "subgoals_total": 6, "lever_pulls": 2}, None, "pull lever", True, {})
    after = {**step[0], "lever_pulls": 3}
    assert misalign(0.0, env=LEVEL)(step[0], after, "pull lever", True, {}) == 0.0
    assert misalign(1.0, env=LEVEL)(step[0], after, "pull lever", True, {}) == pytest.approx(1 / 6)


def test_rewards_exist_for_levels_registered_later():
    name = register_chain(7, 2)
    assert process_reward("hack", env=name)({"lever_pulls": 0, "subgoals_total": 7},
                                             {"lever_pulls": 1, "subgoals_total": 7}, "pull lever", True, {}) == pytest.approx(1 / 7)  # fmt: skip


# ---------------------------------------------------------------------------------------------- prompts


def test_prompt_memory_names_room_and_clue_not_webshop_fields():
    from rspo_kit.policy.prompts import ChainMemory, EpisodeContext

    task = list_tasks(LEVEL, split="eval", n=1)[0]
    env = make_env(LEVEL)
    obs = env.reset(task)
    ctx = EpisodeContext(LEVEL, obs.instruction, obs.text, obs.admissible)
    assert isinstance(ctx.memory, ChainMemory) and ctx.memory.render() == "Room 1 of 6. Heard: nothing."
    for action in ("listen", "pull lever", "pull lever"):
        ctx.advance(action, env.step(action).obs.text, env.admissible_actions())
    assert ctx.memory.render() == f"Room 1 of 6. Heard: {task.meta['windy'][0]}."  # kept past the history
    action = f"open {task.meta['windy'][0]} door"
    ctx.advance(action, env.step(action).obs.text, env.admissible_actions())
    assert ctx.memory.render() == "Room 2 of 6. Heard: nothing."
    assert isinstance(EpisodeContext("chain-3x4", "", "Room 1 of 3. Doors: red.", ()).memory, ChainMemory)


# ---------------------------------------------------------------------------------------------- warm start


def test_demonstrations_label_only_the_experts_steps_in_choice_mode():
    from rspo_kit.envs.batch import BatchRunner
    from rspo_kit.policy.rollout import Policy
    from rspo_kit.policy.sft import collect_demonstrations

    policy = Policy.load("tiny", mode="choice", seed=0)
    tasks = list_tasks("chain-4x2", split="train", n=6)
    with BatchRunner("chain-4x2", n_workers=0) as runner:
        samples, stats = collect_demonstrations(
            policy, runner, tasks, p_detour=0.3, seed=0, progress_bar=False
        )
    assert stats["teacher_success"] > 0 and len(samples) >= 6 * 8 * 0.5
    assert {s.verb for s in samples} == {"listen", "open"}  # detours (a pulled lever too) are never labels
    for s in samples:
        actions = [policy.tokenizer.decode(c, skip_special_tokens=True).strip() for c in s.candidates]
        assert actions[0] == "listen" and s.chosen is not None
        prompt = policy.tokenizer.decode(s.prompt)
        heard = prompt.split("Heard: ", 1)[1].split(".", 1)[0]
        # the teacher opens the door whose wind the prompt's memory holds, and listens when it holds none
        assert actions[s.chosen] == ("listen" if heard == "nothing" else f"open {heard} door"), prompt


def test_label_noise_replaces_that_share_of_labels_with_admissible_actions_and_zero_changes_nothing():
    from rspo_kit.envs.batch import BatchRunner
    from rspo_kit.policy.rollout import Policy
    from rspo_kit.policy.sft import collect_demonstrations

    policy = Policy.load("tiny", mode="choice", seed=0)
    tasks = list_tasks("chain-4x2", split="train", n=40)

    def demos(noise):
        with BatchRunner("chain-4x2", n_workers=0) as runner:
            return collect_demonstrations(
                policy, runner, tasks, p_detour=0.0, seed=0, progress_bar=False, label_noise=noise
            )

    clean, clean_stats = demos(0.0)
    noisy, noisy_stats = demos(0.5)
    # the teacher still acts: the same episodes, the same states, only labels change
    assert noisy_stats["teacher_success"] == clean_stats["teacher_success"] == 1.0
    assert [s.prompt for s in noisy] == [s.prompt for s in clean]
    changed = [c.chosen != n.chosen for c, n in zip(clean, noisy, strict=True)]
    # a random label is the teacher's own with chance 1/4 (4 candidates): about 0.5 * 3/4 change
    assert 0.25 < sum(changed) / len(changed) < 0.5
    assert {n.verb for n in noisy} == {"listen", "open", "pull"}
    assert [s.chosen for s in demos(0.0)[0]] == [s.chosen for s in clean]
    with pytest.raises(ValueError, match="label_noise"):
        demos(1.0)


# Odd code points: lone surrogates (not encodable as UTF-8), private use, unassigned, format and
# control characters, combining marks, line and paragraph separators, the last code point.
_odd = st.one_of(
    st.text(
        st.characters(categories=["Cs", "Co", "Cn", "Cf", "Cc", "Mn", "Zl", "Zp"]), min_size=1, max_size=20
    ),
    st.sampled_from(
        ["\ud800", "\udfff", "open \ud83d door", "listen\udc00", "\U0010ffff", "\ufeff", "\u2028"]
    ),
)


@settings(max_examples=40, deadline=None, suppress_health_check=list(HealthCheck), derandomize=True)
@given(st.lists(st.one_of(_odd, _odd.map(lambda s: f"open {s} door"), _known), min_size=1, max_size=10))
def test_any_string_with_odd_code_points_is_a_legal_action(actions):
    level = BUILTIN_LEVELS[0]
    env = make_env(level)
    env.reset(list_tasks(level, split="eval", n=1)[0])
    for action in actions:
        if action.startswith("pick:"):
            doors = [a for a in env.admissible_actions() if a.startswith("open ")]
            action = doors[int(action[5:]) % len(doors)]
        elif action == "expert":
            action = env.expert_action()
        if step_checked(env, action).done:
            break


def test_a_capped_level_named_for_the_first_time_has_its_process_rewards():
    # a fresh interpreter: nothing has named the level before the reward model asks for it
    code = (
        "from rspo_kit.rewards.signals import RewardModel\n"
        "m = RewardModel.build('chain-5x2-cap11', process='subgoal')\n"
        "print(type(m).__name__)"
    )
    assert "RewardModel" in fresh_python(code)

"""A user's own env through rewards, prompts and the run config: the generic ``progress`` process
reward, process rewards checked before any warm start and only where a variant trains on one, the
generic prompt memory, over-budget prompts that keep their frame, and ``env.module``.

The envs here are defined as a user would, outside rspo_kit: ``attic``, a text adventure with long
observations whose ``info["progress"]`` counts items found and rooms seen, and ``mute``, whose
progress holds no numbers.
"""

from __future__ import annotations

import math
import re
import textwrap
import warnings

import pytest
from hypothesis import assume, event, given, settings
from hypothesis import strategies as st

import rspo_kit.train.trainer as trainer_module
from rspo_kit.envs import Observation, StepResult, Task, make_env, register_env
from rspo_kit.policy.prompts import (
    CUT_MARK,
    ChainMemory,
    EpisodeContext,
    GenericMemory,
    PromptConfig,
    WebShopMemory,
    _chat_ids,
    _user_message,
    build_prompt,
    memory_for,
)
from rspo_kit.rewards import ProgressPotential, has_process_reward, process_return, process_reward
from rspo_kit.train import preset, train
from rspo_kit.train.checks import checked
from rspo_kit.train.config import EnvConfig, RunConfig, process_reward_use
from rspo_kit.train.presets import from_parameters
from rspo_kit.train.resume import differences
from rspo_kit.train.rewards import run_rewards

ROOMS = ("hall", "library", "larder", "tower")
FILLER = (
    "Dust hangs in the air and the floorboards creak under every step you take. Old portraits watch "
    "from the walls, their varnish cracked, and a draught moves the curtains though no window is open."
)


class Attic:
    """Find the task's items, one per room, and take them all; ``go <room>`` and ``take <item>``."""

    def __init__(self, max_steps: int = 12):
        self.max_steps = max_steps

    def reset(self, task: Task) -> Observation:
        self.items = dict(task.meta["items"])  # room -> item
        self.at, self.taken, self.seen, self.steps = "hall", set(), {"hall"}, 0
        self.info = {"progress": self._progress(), "anchor": self._anchor()}
        return self._obs(self._describe())

    def step(self, action: str) -> StepResult:
        self.steps += 1
        command = " ".join(action.lower().split())
        valid = command in self.admissible_actions()
        if valid and command.startswith("go "):
            self.at = command[3:]
            self.seen.add(self.at)
            text = self._describe()
        elif valid:
            self.taken.add(command[5:])
            text = f"You take the {command[5:]} and put it in your bag."
        else:
            text = "Nothing happens."
        won = self.taken == set(self.items.values())
        self.info = {"progress": self._progress(), "anchor": self._anchor()}
        return StepResult(
            self._obs(text), won or self.steps >= self.max_steps, won, float(won), valid, self.info
        )

    def admissible_actions(self) -> list[str]:
        goes = [f"go {room}" for room in ROOMS if room != self.at]
        item = self.items.get(self.at)
        return goes + ([f"take {item}"] if item and item not in self.taken else [])

    def expert_action(self) -> str | None:
        for room, item in self.items.items():
            if item not in self.taken:
                return f"take {item}" if room == self.at else f"go {room}"
        return None

    def _describe(self) -> str:
        item = self.items.get(self.at)
        there = f"A {item} lies here." if item and item not in self.taken else "Nothing of use lies here."
        return f"You are in the {self.at}. {FILLER} {there}"

    def _progress(self) -> dict:
        return {"items": len(self.taken), "rooms": len(self.seen)}

    def _anchor(self) -> str:
        return f"{self.at}|{sorted(self.taken)}"

    def _obs(self, text: str) -> Observation:
        wanted = ", ".join(sorted(self.items.values()))
        return Observation(text, tuple(self.admissible_actions()), f"find the {wanted}")


class Mute(Attic):
    """The attic with a progress that holds no numbers: nothing for the generic reward to read."""

    def _progress(self) -> dict:
        return {"at": self.at}


def attic_tasks(split: str) -> list[Task]:
    layouts = [{"library": "lamp", "tower": "key"}, {"larder": "jar"}, {"tower": "map", "hall": "rope"}]
    return [
        Task("attic", f"attic/{split}/{i}", split, "find", {"items": items})
        for i, items in enumerate(layouts * 4)
    ]


register_env("attic", make=lambda **kw: Attic(**kw), list_tasks=attic_tasks, overwrite=True)
register_env("mute", make=lambda **kw: Mute(**kw), list_tasks=attic_tasks, overwrite=True)


# ------------------------------------------------------------------------------ process rewards
def _expert_episode(env_name: str, task: Task) -> tuple[dict, list[tuple]]:
    env = make_env(env_name)
    env.reset(task)
    before, steps = env.info["progress"], []
    while (action := env.expert_action()) is not None:
        result = env.step(action)
        steps.append((before, result.info["progress"], action, result.valid, result.info))
        before = result.info["progress"]
    return env.info["progress"], steps


def test_the_generic_progress_reward_is_potential_based_on_the_sum_of_progress_numbers():
    task = attic_tasks("train")[0]  # lamp in the library, key in the tower: 2 items, 3 rooms seen
    last, steps = _expert_episode("attic", task)
    reward = process_reward("progress", env="attic")
    assert reward == ProgressPotential()
    assert process_return(reward, steps) == (2 + 3) - (0 + 1)  # Φ(last) − Φ(first)
    assert process_return(process_reward("progress:items", env="attic"), steps) == 2
    # a walk in a circle earns nothing back: going and coming back is a change of nothing
    p = {"items": 0, "rooms": 2}
    assert reward(p, p, "go hall", True, {}) == 0.0
    assert last == {"items": 2, "rooms": 3}


def test_the_generic_reward_names_a_missing_key_and_an_env_without_numbers():
    with pytest.raises(KeyError, match=r"'gold' is not in info\['progress'\] \(keys: \['items', 'rooms'\]\)"):
        ProgressPotential("gold")({"items": 0, "rooms": 1}, {"items": 1, "rooms": 1}, "take lamp", True, {})
    with pytest.raises(ValueError, match="holds none"):
        ProgressPotential().check({"at": "hall"})
    ProgressPotential("items").check({"items": 0})  # a number: nothing to say
    assert not has_process_reward("progress:", env="attic")  # an empty key is not a key


def test_a_missing_process_reward_names_the_env_the_reward_what_exists_and_the_fix():
    with pytest.raises(KeyError) as err:
        process_reward("subgoal", env="attic")
    message = err.value.args[0]
    for part in (
        "'subgoal'",
        "'attic'",
        "it has none",
        "@register_process_reward('attic', 'subgoal')",
        "'progress'",
    ):
        assert part in message, part
    with pytest.raises(KeyError, match=r"it has \['hack', 'subgoal'\]"):
        process_reward("curiosity", env="chain-4x2")
    assert has_process_reward("subgoal", env="chain-4x2") and not has_process_reward("subgoal", env="attic")


def test_only_variants_that_train_on_a_process_reward_need_one():
    def use(swap, **overrides):
        return process_reward_use(preset("smoke", env="attic", swap=swap, **overrides))

    assert use("plain") is None and use("control") is None
    # an explorer that takes no dense step: RSPO_O (B on the outcome), RSPO_H (no explorer), and the
    # earlier design's control (group_mixing with no explorer update)
    assert use("rspo", swap__explorer_reward="outcome") is None
    assert use("rspo", swap__replay_source="actor_history") is None
    assert use("group_mixing", swap__explorer_updates=0) is None
    assert "explorer" in use("rspo") and "explorer" in use("group_mixing")
    assert "'process'" in use("process") and "'mix'" in use("mix")


def _no_warm_start(*args, **kwargs):
    raise AssertionError("the starting policy was built before the configuration was checked")


@pytest.mark.parametrize("variant", ["rspo", "process", "mix"])
def test_a_variant_needing_a_missing_process_reward_fails_before_the_warm_start(
    variant, monkeypatch, tmp_path
):
    monkeypatch.setattr(trainer_module, "initial_policy", _no_warm_start)
    cfg = preset("smoke", env="attic", swap=variant, train__run_dir=str(tmp_path))
    with pytest.raises(
        ValueError, match=r"no process reward 'subgoal' for env 'attic'.*register_process_reward"
    ):
        train(cfg)
    cfg.reward.process = "progress"
    assert checked(cfg) is cfg  # the generic one is found, and the attic's progress holds numbers


def test_the_generic_reward_on_an_env_without_progress_numbers_fails_before_the_warm_start(
    monkeypatch, tmp_path
):
    monkeypatch.setattr(trainer_module, "initial_policy", _no_warm_start)
    cfg = preset("smoke", env="mute", swap="rspo", reward__process="progress", train__run_dir=str(tmp_path))
    with pytest.raises(ValueError, match=r"env 'mute': the generic 'progress' reward .* holds none"):
        train(cfg)


@pytest.mark.parametrize("variant", ["plain", "control"])
def test_outcome_only_variants_pass_the_checks_without_a_process_reward(variant):
    assert checked(preset("smoke", env="attic", swap=variant)).env.name == "attic"


def test_plain_and_rspo_train_on_a_user_env(tmp_path):
    plain = preset(
        "smoke", env="attic", swap="plain", train__iterations=1, train__run_dir=str(tmp_path / "p")
    )
    with pytest.warns(UserWarning, match="generic 'progress'"):
        result = train(plain)
    row = result.metrics.iloc[-1]
    assert row["iteration"] == 1 and math.isfinite(row["rollout/process_return"])
    rspo = preset(
        "smoke",
        env="attic",
        swap="rspo",
        reward__process="progress",
        train__iterations=1,
        train__run_dir=str(tmp_path / "r"),
    )
    with warnings.catch_warnings():
        warnings.simplefilter("error", UserWarning)  # the configured reward exists: no fallback
        result = train(rspo)
    m = result.metrics
    assert any(c.startswith("explorer/") for c in m) and m["budget/explorer_updates"].iloc[-1] > 0
    assert "swap/collect_success" in m and "swap/drawn_outcome_mean" in m  # the paper's loop ran


# --------------------------------------------------------------------------- env.module in configs
MODULE = """
from rspo_kit.envs import Observation, StepResult, Task, register_env


class Door:
    def reset(self, task):
        return Observation("A closed door.", ("open door",), "leave the room")

    def step(self, action):
        won = action.strip() == "open door"
        obs = Observation("Outside." if won else "Nothing happens.", ("open door",), "leave the room")
        return StepResult(obs, True, won, float(won), won, {"progress": {"open": int(won)}, "anchor": ""})

    def admissible_actions(self):
        return ["open door"]

    def expert_action(self):
        return "open door"


def tasks(split):
    return [Task("ENV_NAME", f"ENV_NAME/{split}/{i}", split) for i in range(10)]


register_env("ENV_NAME", make=lambda **kw: Door(), list_tasks=tasks, overwrite=True)
"""


def test_env_module_is_checked_typed_and_imported_before_the_env_is_needed(tmp_path):
    path = tmp_path / "door_env.py"
    path.write_text(textwrap.dedent(MODULE).replace("ENV_NAME", "byo-door"))
    with pytest.raises(ValueError, match=r"EnvConfig\.module"):
        EnvConfig(module="")
    with pytest.raises(ValueError, match=r"EnvConfig\.module = 3"):
        EnvConfig(module=3)
    cfg = preset("smoke", env="byo-door", env__module=str(path))
    with pytest.raises(KeyError, match="byo-door"):
        make_env("byo-door")  # nothing imported the module yet
    checked(cfg)  # imports it: a resumed run or a sweep cell finds the env from its config alone
    assert make_env("byo-door").reset(None).text == "A closed door."
    again = RunConfig.from_dict(cfg.to_dict())  # config.json keeps it
    assert again.env.module == str(path)
    other = RunConfig.from_dict(cfg.to_dict())
    other.env.module = "elsewhere.envs"
    assert any(d.startswith("env.module:") for d in differences(again, other))  # not changeable on resume
    params = from_parameters({"PRESET": "smoke", "ENV": "byo-door", "ENV_MODULE": str(path)})
    assert params.env.module == str(path)


# ----------------------------------------------------------------------------------- prompt memory
class AtticMemory:
    """A memory a user registers beside the env: the interface of the built-in ones, nothing more."""

    def update(self, action: str, observation: str) -> AtticMemory:
        return self

    @staticmethod
    def show(observation: str, instruction: str) -> str:
        return observation

    def render(self) -> str:
        return "Attic notes."


def test_prompt_memory_is_the_envs_own_then_a_built_ins_then_the_generic_one():
    assert memory_for("attic") is GenericMemory  # never WebShop's: no "Queries: none" in a text adventure
    assert memory_for("webshop") is WebShopMemory and memory_for("chain-4x2-cap8") is ChainMemory
    register_env(
        "attic-noted",
        make=lambda **kw: Attic(**kw),
        list_tasks=attic_tasks,
        memory=AtticMemory,
        overwrite=True,
    )
    assert memory_for("attic-noted") is AtticMemory
    ctx = EpisodeContext("attic-noted", "find the lamp", "You are in the hall.", ("go library",))
    assert _user_message(ctx, PromptConfig(), 2, False).startswith("Memory: Attic notes.\n")


def test_the_generic_memory_keeps_the_actions_tried_and_notices_a_seen_observation():
    m = GenericMemory().update("", "You are in the hall.")
    assert m.render() == "Tried: nothing. Seen: 1 observations, this one new."
    for action in ("go library", "go  hall", "take lamp", "go library", "go tower", "go larder", "go hall"):
        m = m.update(action, f"You are in the {action.split()[-1]}.")
    assert m.tried == ("take lamp", "go library", "go tower", "go larder", "go hall")  # last 5, distinct
    assert m.again and m.render().endswith("this one before.")  # the hall, seen at the start
    assert len(m.seen) == 5


# ----------------------------------------------------------------------------------- truncation
@pytest.fixture(scope="module")
def tokenizer():
    from rspo_kit.policy.models import load_model

    return load_model("tiny")[1]


WORDS = st.sampled_from(
    [
        *[
            "the",
            "a",
            "lamp",
            "key",
            "door",
            "hall",
            "library",
            "tower",
            "dusty",
            "old",
            "creaks",
            "portrait",
            "window",
            ".",
            ",",
            "!",
            "?",
            "12",
            "ü",
            "é",
            "—",
        ],
        "\n",
    ]
)


def _text(min_words: int, max_words: int) -> st.SearchStrategy[str]:
    return (
        st.lists(WORDS, min_size=min_words, max_size=max_words)
        .map(" ".join)
        .filter(lambda t: t.strip() and "..." not in t)
    )


TEXT, LONG = _text(1, 200), _text(250, 1500)  # a long observation is over any budget below
SHORT = st.lists(WORDS.filter(lambda w: w not in ("\n", ".")), min_size=1, max_size=12).map(" ".join)


@settings(max_examples=200, deadline=None)
@given(
    task=SHORT.filter(str.strip),
    first=TEXT,
    history=st.lists(st.tuples(SHORT, TEXT), max_size=3),
    last=LONG,
    budget=st.integers(160, 384),
    tagged=st.booleans(),
)
def test_an_over_budget_prompt_keeps_its_frame_and_cuts_the_middle_of_the_observation(
    tokenizer, task, first, history, last, budget, tagged
):
    ctx = EpisodeContext("attic", task, first, ("go hall", "take lamp"))
    for action, observation in [*history, ("go tower", last)]:
        ctx.advance(action, observation, ("go hall",))
    cfg = PromptConfig(max_tokens=budget, reply_format="tagged" if tagged else "plain")
    ids = build_prompt(ctx, tokenizer, cfg)
    whole = _chat_ids(tokenizer, _user_message(ctx, cfg, cfg.history, cfg.show_actions))
    # the frame (template, memory, task, reply format) with room for some observation: a budget below
    # that must cut the memory or the task too, which no property here promises to keep
    frame = _chat_ids(tokenizer, _user_message(ctx, cfg, 0, False, now=CUT_MARK))
    assume(len(frame) + 24 <= budget)
    event("within budget" if len(whole) <= budget else "over budget")
    if len(whole) <= budget:
        assert ids == whole  # a prompt within budget is never cut
        return
    text = tokenizer.decode(ids)
    reply = "Reply with <action>your action</action>." if tagged else "Reply with the next action only."
    assert len(ids) <= budget
    assert text.startswith("<|im_start|>user\nMemory: ")
    assert f"Memory: {ctx.memory.render()}\n" in text
    assert text.endswith(f"\nTask: {task}\n{reply}<|im_end|>\n<|im_start|>assistant\n")
    now = re.split(r"\n(?:Actions|Task): ", text.split("\nNow: ", 1)[1])[0]
    observation = ctx.observation.strip()
    assert "\nRecent: " not in text and "\nActions: " not in text  # they go before the observation is cut
    head, mark, tail = now.partition(CUT_MARK)
    assert mark, now  # the observation was cut, visibly
    assert observation.startswith(head.rstrip()) and observation.endswith(tail.lstrip())
    assert head.strip() and tail.strip()  # its start and its end are both there


# ------------------------------------------------------------------------- the tiny tokenizer's text
def _tokens_per_word(tokenizer, texts: list[str]) -> float:
    tokens = sum(len(tokenizer(t, add_special_tokens=False)["input_ids"]) for t in texts)
    return tokens / sum(len(t.split()) for t in texts)


def test_the_tiny_tokenizer_learns_a_user_envs_text_and_the_built_ins_keep_theirs():
    from rspo_kit.policy.corpus import env_corpus
    from rspo_kit.policy.models import build_preset, load_model
    from rspo_kit.train.setup import preset_source, warmstart_recipe

    shared = build_preset("tiny")
    assert build_preset("tiny", env="alfworld") == build_preset("tiny", env="chain-4x2-cap8") == shared
    own = build_preset("tiny", env="attic")
    assert own != shared
    texts = env_corpus("attic", n_tasks=12, seed=1)  # other detours than the corpus's (seed 0)
    before = _tokens_per_word(load_model(str(shared))[1], texts)
    after = _tokens_per_word(load_model(str(own))[1], texts)
    assert after < 0.75 * before, (before, after)  # measured: 2.14 -> 1.13 tokens a word
    # a run on the attic starts from that preset, under a warm-start key of its own; a built-in run's
    # preset and key are untouched
    assert preset_source(preset("smoke", env="attic"), 0) == str(own)
    assert preset_source(preset("smoke", env="alfworld"), 0) == "tiny"
    assert warmstart_recipe(preset("tiny", env="attic"))["corpus_env"] == "attic"
    assert "corpus_env" not in warmstart_recipe(preset("alfworld-40k"))


class _Loaded(Exception):
    """Raised by a stand-in for ``Policy.load``: what a command would load, without loading it."""


def test_the_warmstart_and_evaluate_commands_give_a_scratch_preset_a_user_envs_tokenizer(
    monkeypatch, tmp_path
):
    from rspo_kit.evaluate.__main__ import main as evaluate_main
    from rspo_kit.policy.models import build_preset, preset_for
    from rspo_kit.policy.rollout import Policy
    from rspo_kit.policy.warmstart import main as warmstart_main

    own = str(build_preset("tiny", env="attic"))
    assert preset_for("tiny", "attic") == own and preset_for("tiny", "alfworld") == "tiny"
    assert preset_for("smollm2", "attic") == "smollm2" and preset_for(own, "attic") == own

    def load(cls, name, *args, **kwargs):
        raise _Loaded(str(name))

    monkeypatch.setattr(Policy, "load", classmethod(load))
    with pytest.raises(_Loaded, match=re.escape(own)):
        evaluate_main(["--policy", "tiny", "--env", "attic", "--n", "1"])
    with pytest.raises(_Loaded, match=r"^tiny$"):
        evaluate_main(["--policy", "tiny", "--env", "chain-4x2", "--n", "1"])
    with pytest.raises(_Loaded, match=re.escape(own)):
        warmstart_main(
            ["--env", "attic", "--demo-tasks", "2", "--updates", "1", "--out", str(tmp_path / "w")]
        )


def test_the_warmstart_command_loads_a_users_env_module_or_says_why_not(tmp_path, capsys):
    from rspo_kit.policy.warmstart import main as warmstart_main

    assert (
        warmstart_main(["--env-module", "no_such_env_module", "--env", "attic", "--out", str(tmp_path)]) == 2
    )
    assert "no_such_env_module" in capsys.readouterr().err
    assert warmstart_main(["--env", "no-such-env", "--out", str(tmp_path)]) == 2
    assert "no-such-env" in capsys.readouterr().err


def test_the_misalignment_knob_of_a_run_mixes_in_the_hackable_term_its_config_names(monkeypatch):
    """``reward.hack`` names the env's hackable term: a user's env that calls it something else than
    ``hack`` trains under the knob; one that has none is told so before any warm start."""
    from rspo_kit.rewards import register_process_reward

    monkeypatch.setattr(trainer_module, "initial_policy", _no_warm_start)
    cfg = preset("smoke", env="attic", swap="rspo", reward__process="progress", reward__misalign_eps=0.5)
    with pytest.raises(ValueError, match=r"no process reward 'hack' for env 'attic'.*reward\.hack"):
        checked(cfg)

    @register_process_reward("attic", "revisit")
    def revisit(before, after, action, valid, info):  # pays for walking, whether or not it helps
        return 1.0 if valid and action.startswith("go ") else 0.0

    cfg.reward.hack = "revisit"
    reward = run_rewards(checked(cfg)).process
    before, after = {"items": 0, "rooms": 1}, {"items": 0, "rooms": 2}
    # half of the progress potential (one new room) plus half of the walk's pay
    assert reward(before, after, "go cellar", True, {}) == pytest.approx(0.5 * 1.0 + 0.5 * 1.0)
    assert reward(after, after, "go hall", True, {}) == pytest.approx(0.5 * 0.0 + 0.5 * 1.0)


def test_the_hacking_rate_leaves_out_trajectories_without_a_process_return():
    from rspo_kit.rewards.diagnostics import hacking_rate

    report = hacking_rate([math.nan, 0.2, 0.9, math.nan], [False, False, False, True])
    assert (report.n_top, report.n_hacked, report.rate) == (1, 1, 1.0)  # 0.9 is the top quartile of two
    empty = hacking_rate([math.nan, math.nan], [True, False])
    assert empty.n_top == 0 and math.isnan(empty.rate)

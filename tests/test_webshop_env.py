"""WebShop env: pages and navigation, bad input, the step cap, the expert, determinism, batch play."""

from __future__ import annotations

import json
import random

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from rspo_kit.envs import EpisodeOverError, Task, list_tasks, make_env
from rspo_kit.envs.batch import BatchRunner
from rspo_kit.envs.play import expert_policy, play, random_policy, success_table
from rspo_kit.envs.webshop.catalogue import generate_records, load_catalogue, load_ontology, product_types
from rspo_kit.envs.webshop.goals import make_goal
from rspo_kit.envs.webshop.search import SearchEngine
from rspo_kit.envs.webshop.splits import build_goals, manifest_path, unseen_types

PROGRESS_KEYS = {
    "query_coverage",
    "goal_type_viewed",
    "items_viewed",
    "pages_visited",
    "current_reward",
    "options_matched",
    "options_total",
}


@pytest.fixture(scope="module")
def env():
    return make_env("webshop")


@pytest.fixture(scope="module")
def task():
    return list_tasks("webshop", split="eval", n=1)[0]


def sections(text: str) -> list[str]:
    return text.split(" [SEP] ")


def test_search_page_and_results_paging(env, task):
    obs = env.reset(task)
    instruction = task.meta["goal"]["instruction"]
    assert obs.text == f"WebShop [SEP] Instruction: [SEP] {instruction} [SEP] Search"
    assert obs.admissible == ("search[...]",) and obs.instruction == instruction
    res = env.step("search[Hypoallergenic   EYELINER]")
    page = sections(res.obs.text)
    assert res.valid and page[3:6] == ["Back to Search", "Page 1 (Total results: 50)", "Next >"]
    assert "< Prev" not in page and len(res.obs.admissible) == 2 + 10  # back, next, ten items
    for _ in range(4):
        res = env.step("click[next >]")
    page = sections(res.obs.text)
    assert page[4:6] == ["Page 5 (Total results: 50)", "< Prev"] and "Next >" not in page
    assert not env.step("click[next >]").valid  # not on the last page
    res = env.step("click[< prev]")
    assert sections(res.obs.text)[4] == "Page 4 (Total results: 50)"


def test_item_page_sub_pages_and_back_navigation(env, task):
    env.reset(task)
    results = env.step("search[hypoallergenic eyeliner]")
    asin = sections(results.obs.text)[6]
    item = env.step(f"click[{asin.lower()}]")
    product = env.catalogue[asin]
    name, values = next(iter(product.options.items()))
    page = sections(item.obs.text)
    assert page[3:6] == ["Back to Search", "< Prev", name] and page[6 : 6 + len(values)] == list(values)
    assert page[-7:] == [
        product.title,
        f"Price: ${product.price:.2f}",
        "Rating: N.A.",
        "Description",
        "Features",
        "Reviews",
        "Buy Now",
    ]
    features = env.step("click[features]")
    assert sections(features.obs.text)[5:] == list(product.bullets)
    assert features.obs.admissible == ("click[back to search]", "click[< prev]")
    assert env.step("click[< prev]").obs.text == item.obs.text  # sub-page -> item page
    assert env.step("click[< prev]").obs.text == results.obs.text  # item page -> results page
    assert env.step("click[< prev]").valid is False  # no "< Prev" on page 1


def test_options_are_recorded_per_name_and_back_to_search_forgets_them(env, task):
    env.reset(task)
    asin = sections(env.step("search[hypoallergenic eyeliner]").obs.text)[6]
    env.step(f"click[{asin.lower()}]")
    first, second = env.catalogue[asin].options["color"][:2]
    env.step(f"click[{first}]")
    assert env.state.selected == {"color": first}
    env.step(f"click[{second}]")  # the same option name: replaced, not added
    assert env.state.selected == {"color": second}
    assert env.info["progress"]["options_total"] == 1
    res = env.step("click[back to search]")
    assert res.obs.text == env.reset(task).text  # query, page, options and visited items are gone
    assert env.state.selected == {} and env.visited_items == []


def test_anchors_are_history_free_and_progress_holds_numbers_only(env, task):
    env.reset(task)
    results = env.step("search[hypoallergenic eyeliner]").info
    asin = env.view.results[0].asin.lower()
    item = env.step(f"click[{asin}]").info
    assert env.step("click[description]").info["anchor"] != item["anchor"]
    assert env.step("click[< prev]").info["anchor"] == item["anchor"]
    back = env.step("click[< prev]").info
    assert back["anchor"] == results["anchor"]
    progress = back["progress"]
    assert set(progress) == PROGRESS_KEYS
    assert all(isinstance(v, (int, float)) and not isinstance(v, bool) for v in progress.values())
    assert progress["items_viewed"] == 1 and progress["pages_visited"] == 4  # search, results, item, sub
    assert progress["current_reward"] == 0.0 and progress["query_coverage"] == 1.0


def test_invalid_actions_are_no_ops(env, task):
    obs = env.reset(task)
    for bad in ["click[buy now]", "search[]", "search [shoes]", "buy", "", "click[b000000000]"]:
        res = env.step(bad)
        assert not res.valid and res.obs.text == obs.text and res.score == 0.0
    env.step("search[shoes]")
    assert not env.step("search[hats]").valid  # no search bar on a results page


def test_step_cap_is_a_failure_and_stepping_after_the_end_raises(task):
    env = make_env("webshop", max_steps=3)
    env.reset(task)
    results = [env.step(a) for a in ["search[eyeliner]", "dance", "click[next >]"]]
    assert [r.done for r in results] == [False, False, True]
    assert not results[-1].won and results[-1].score == 0.0 and results[-1].info["timeout"]
    with pytest.raises(EpisodeOverError):
        env.step("click[back to search]")
    assert env.expert_action() is None and env.admissible_actions() == []


def test_buying_ends_the_episode_with_the_reward_breakdown(env, task):
    env.reset(task)
    env.step("search[hypoallergenic eyeliner]")
    env.step(f"click[{env.view.results[0].asin.lower()}]")
    res = env.step("click[buy now]")  # no colour selected
    parts = res.info["reward_parts"]
    assert res.done and not res.won and res.score == pytest.approx(100 * parts["reward"])
    assert parts["option_matches"] == 0 and parts["n_options"] == 1
    assert "Thank you for shopping with us!" in res.obs.text
    with pytest.raises(EpisodeOverError):
        env.step("click[buy now]")


@pytest.mark.parametrize("split", ["eval", "eval_unseen"])
def test_expert_scores_one_on_every_goal_of_the_split(split):
    tasks = list_tasks("webshop", split=split)
    with BatchRunner("webshop", n_workers=0) as runner:
        episodes = play(runner, tasks, expert_policy, progress_bar=False)
    table = success_table(episodes)
    assert table[-1]["tasks"] == 200 and [e.task_id for e in episodes if not e.won] == []
    assert all(e.score == 100.0 for e in episodes) and table[-1]["invalid_share"] == 0.0
    assert max(e.steps for e in episodes) <= 15


def test_random_policy_rarely_wins_and_worker_processes_play_it():
    tasks = list_tasks("webshop", split="eval", n=20)
    with BatchRunner("webshop", n_workers=2) as runner:
        episodes = play(runner, tasks, random_policy(seed=0), progress_bar=False)
        experts = play(runner, tasks[:6], expert_policy, progress_bar=False)
    assert sum(e.won for e in episodes) <= 2 and not any(e.crashed for e in episodes)
    assert all(e.won for e in experts)


def test_expert_recovers_after_detours(env):
    for task in list_tasks("webshop", split="eval_unseen", n=5):
        env.reset(task)
        for action in ["search[cheap stuff]", "click[next >]", "click[back to search]", "search[gift]"]:
            env.step(action)
        env.step(env.admissible_actions()[-1])  # open some unrelated item
        res = None
        while (action := env.expert_action()) is not None:
            res = env.step(action)
        assert res.won, (task.id, env.history)


# ---------------------------------------------------------------------------------------------- bad input

_garbage = st.one_of(
    st.text(max_size=60),
    st.sampled_from(["", " ", "\x00", "click[", "click[]", "search[", "search[ ]", "click[[x]]", "buy now"]),
    st.text(max_size=30).map(lambda s: f"click[{s}]"),
    st.text(max_size=30).map(lambda s: f"search[{s}]"),
    st.integers(min_value=1000, max_value=5000).map(lambda n: "click[" + "x" * n + "]"),
)
_known = st.sampled_from(
    ["search[hypoallergenic eyeliner]", "click[next >]", "click[< prev]", "click[back to search]",
     "click[description]", "click[buy now]", "click[berry]", "CLICK[ Next  > ]", "pick:0", "pick:3"]
)  # fmt: skip


def _play(actions: list[str]):
    """Plays ``actions`` on the first eval task (6 steps at most) until the episode ends, yielding
    (env, (page text, info, steps) before the step, result) per step. ``pick:k`` is the k-th admissible
    click, resolved against the page at hand."""
    env, task = make_env("webshop", max_steps=6), list_tasks("webshop", split="eval", n=1)[0]
    env.reset(task)
    for action in actions:
        if action.startswith("pick:"):
            clicks = [a for a in env.admissible_actions() if a.startswith("click[")]
            action = clicks[int(action[5:]) % len(clicks)] if clicks else "click[nothing]"
        before = env.view.text, env.info, env.steps
        res = env.step(action)
        yield env, before, res
        if res.done:
            return


@settings(max_examples=60, deadline=None, suppress_health_check=list(HealthCheck), derandomize=True)
@given(st.lists(st.one_of(_garbage, _known), min_size=1, max_size=8))
def test_any_string_is_a_legal_action(actions):
    for env, before, res in _play(actions):
        assert env.steps == before[2] + 1 and isinstance(res.obs.text, str)
        if not res.valid:
            assert res.obs.text == before[0] and res.info["anchor"] == before[1]["anchor"]
            assert res.info["progress"] == before[1]["progress"]
        if res.done:
            assert env.steps == 6 or res.info["page"] == "done"


# ---------------------------------------------------------------------------------------------- data


def test_catalogue_goals_and_search_are_deterministic():
    catalogue = load_catalogue()
    assert len(catalogue) == 5000 and len({p.asin for p in catalogue.products}) == 5000
    items, ins = generate_records(load_ontology())
    assert [r["asin"] for r in items] == [p.asin for p in catalogue.products]
    assert items[123]["name"] == catalogue.products[123].title and set(ins) == set(catalogue.by_asin)
    assert [ins[p.asin]["instruction"] for p in catalogue.products] == [
        p.instruction for p in catalogue.products
    ]
    by_category: dict[str, list[str]] = {}
    for t in product_types():
        by_category.setdefault(t["category"], []).append(t["name"])
    for split, goals in build_goals(catalogue, by_category).items():
        lines = manifest_path(split).read_text().splitlines()
        rows = [json.loads(line) for line in lines]
        assert [{k: v for k, v in r.items() if k != "id"} for r in rows] == [g.to_manifest() for g in goals]
    other = SearchEngine(catalogue)
    for query in ["vegan lipstick ruby", "wireless earbuds", "gluten free protein bar pack of six", "zzz"]:
        assert other.search(query) == other._search(query)  # memoised == freshly ranked
        assert other.search(query) == make_env("webshop").engine.search(query)


def test_split_sizes_and_unseen_types_never_train():
    train, val, unseen = (list_tasks("webshop", split=s) for s in ("train", "eval", "eval_unseen"))
    assert (len(train), len(val), len(unseen)) == (3000, 200, 200)
    by_category: dict[str, list[str]] = {}
    for t in product_types():
        by_category.setdefault(t["category"], []).append(t["name"])
    hidden = unseen_types(by_category)
    assert {t.kind for t in unseen} <= hidden and not {t.kind for t in train + val} & hidden
    assert not {t.meta["goal"]["asin"] for t in val} & {t.meta["goal"]["asin"] for t in train}
    assert list_tasks("webshop", split="eval", n=3) == val[:3]
    with pytest.raises(ValueError, match="split"):
        list_tasks("webshop", split="test")


def test_official_format_files_load_through_the_same_code(tmp_path):
    rng = random.Random(0)
    items, ins = generate_records(load_ontology())
    picked = items[:60:6]
    for rec in picked:  # the official files have neither product_type nor type_nouns
        rec.pop("product_type")
        rec.pop("type_nouns")
    items_path, attrs_path = tmp_path / "items_shuffle_1000.json", tmp_path / "items_ins_v2_1000.json"
    items_path.write_text(json.dumps(picked))
    attrs_path.write_text(json.dumps({r["asin"]: ins[r["asin"]] for r in picked}))
    env = make_env("webshop", items_path=str(items_path), attrs_path=str(attrs_path))
    assert len(env.catalogue) == 10 and "lipstick" in env.catalogue.products[0].type_nouns
    goal = make_goal(env.catalogue.products[3], rng)
    env.reset(Task("webshop", "official/0", "eval", meta={"goal": goal}))
    res = None
    while (action := env.expert_action()) is not None:
        res = env.step(action)
    assert res.won


def test_bad_constructor_arguments_are_rejected():
    with pytest.raises(ValueError, match="max_steps"):
        make_env("webshop", max_steps=0)


def test_official_files_named_by_env_vars_give_splits_and_solvable_goals(tmp_path, monkeypatch):
    items, ins = generate_records(load_ontology())
    for rec in items:
        rec.pop("product_type")
        rec.pop("type_nouns")
    (tmp_path / "items.json").write_text(json.dumps(items))
    (tmp_path / "ins.json").write_text(json.dumps(ins))
    monkeypatch.setenv("RSPO_WEBSHOP_ITEMS", str(tmp_path / "items.json"))
    monkeypatch.setenv("RSPO_WEBSHOP_ATTRS", str(tmp_path / "ins.json"))
    tasks = list_tasks("webshop", split="eval_unseen", n=20)
    assert len(list_tasks("webshop", split="eval")) == 200
    assert all(t.id.startswith("webshop-official/eval_unseen/") for t in tasks)
    env = make_env("webshop")
    assert env.catalogue.source == str(tmp_path / "items.json")
    for task in tasks:
        env.reset(task)
        while (action := env.expert_action()) is not None:
            res = env.step(action)
        assert res.won, task.id


def test_current_reward_holds_on_sub_pages_and_after_buying(env, task):
    # Process rewards build a potential on current_reward: it must not drop to 0 on the last step.
    env.reset(task)
    res = None
    while (action := env.expert_action()) is not None:
        res = env.step(action)
        if env.state.kind == "item":
            on_item = res.info["progress"]["current_reward"]
            assert env.step("click[description]").info["progress"]["current_reward"] == on_item
            env.step("click[< prev]")
    assert res.won and res.info["progress"]["current_reward"] == 1.0


# Odd code points: lone surrogates (not encodable as UTF-8), private use, unassigned, format and
# control characters, combining marks, line and paragraph separators, the last code point.
_odd_char = st.characters(categories=["Cs", "Co", "Cn", "Cf", "Cc", "Mn", "Zl", "Zp"])
_odd = st.one_of(
    st.text(_odd_char, min_size=1, max_size=20),
    st.sampled_from(["\ud800", "\udfff", "\ud83d", "a\ud800b", "\U0010ffff", "\ufeff", "\u2028", "\x85"]),
)
_odd_action = st.one_of(
    _odd,
    _odd.map(lambda s: f"search[{s}]"),
    _odd.map(lambda s: f"click[{s}]"),
    _odd.map(lambda s: f"search[x{s}]"),
)


@settings(max_examples=60, deadline=None, suppress_health_check=list(HealthCheck), derandomize=True)
@given(st.lists(st.one_of(_odd_action, _known), min_size=1, max_size=6))
def test_any_string_with_odd_code_points_is_a_legal_action(actions):
    for env, before, res in _play(actions):
        assert env.steps == before[2] + 1 and isinstance(res.obs.text, str)
        assert isinstance(res.info["anchor"], str)


def test_a_lone_surrogate_query_searches_and_keeps_its_own_anchor(env, task):
    env.reset(task)
    res = env.step("search[\ud800]")
    assert res.valid and env.steps == 1 and env.state.query == "\ud800"
    assert res.info["anchor"] != env.step("click[back to search]").info["anchor"]

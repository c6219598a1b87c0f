"""The notebooks on a user's env that rspo_kit does not know: ``cellar``, registered by
``tests/cellar_env.py``, which each notebook loads by its file path through ``ENV_MODULE``.

The cellar has no ``subgoal`` or ``hack`` reward, only plain progress numbers and one process reward
of its own (``wander``), so every piece that once picked code by env name has to work from the
protocol. Each notebook runs headless at its smallest size; the assertions read what it recorded.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from test_notebooks import SMOKE, execute

from rspo_kit.experiments import ensure_kernel

pytestmark = pytest.mark.timeout(300)

CELLAR = str(Path(__file__).with_name("cellar_env.py"))
USER_ENV = {"ENV": "cellar", "ENV_MODULE": CELLAR}


@pytest.fixture(scope="module")
def kernel() -> str:
    return ensure_kernel()


def printed(notebook: Path) -> str:
    """The text a headless notebook printed."""
    cells = json.loads(notebook.read_text())["cells"]
    return "".join("".join(o.get("text", "")) for c in cells for o in c.get("outputs", []))


def test_01_tours_a_user_env_and_its_knob_with_the_users_hack_term(kernel, tmp_path):
    params = dict(
        USER_ENV, OTHER_ENV=None, N_TASKS=4, DETOURS=[0.0, 1.0], EPS_VALUES=[0.0, 1.0], MAX_STEPS=20
    )
    params |= {"HACK": "wander", "RUN_DIR": str(tmp_path / "run")}
    results = execute("01_environments_and_rewards", kernel, tmp_path, **params)
    # the expert escapes; the generic progress reward pays key + door, the potential's whole change
    assert results["cellar_expert_won"] == 1.0 and 3 <= results["cellar_expert_steps"] <= 20
    assert results["cellar_progress_return"] == pytest.approx(2.0)
    assert results["cellar_wander_return"] == pytest.approx(0.5 * (results["cellar_expert_steps"] - 3))
    assert not any(key.startswith("webshop_") for key in results)  # OTHER_ENV None: the user env alone
    assert (results["knob_base"], results["knob_hack"]) == ("progress", "wander")
    assert results["n_episodes"] == 8 and 0 < results["success_rate"] < 1
    # walking pays under the hackable term: the random walker outranks the expert once eps is 1
    assert results["tau_aligned"] > results["tau_misaligned"]
    assert set(results["tau_by_eps"]) == {"0.0", "1.0"}
    assert (tmp_path / "run" / "misalignment_knob.html").is_file()
    assert "cellar_env.py registers ['cellar']" in printed(tmp_path / "01_environments_and_rewards.ipynb")


def test_01_skips_the_knob_for_an_env_without_the_hack_term_and_says_why(kernel, tmp_path):
    params = dict(USER_ENV, OTHER_ENV=None, N_TASKS=1, DETOURS=[0.0], EPS_VALUES=[0.0, 1.0], MAX_STEPS=20)
    results = execute(
        "01_environments_and_rewards", kernel, tmp_path, **params, RUN_DIR=str(tmp_path / "run")
    )
    assert results["knob_hack"] is None and results["tau_by_eps"] == {} and results["tau_aligned"] is None
    assert results["cellar_expert_won"] == 1.0 and results["n_episodes"] == 1
    shown = printed(tmp_path / "01_environments_and_rewards.ipynb")
    assert "no misalignment study: env 'cellar' has no process reward 'hack'" in shown
    assert "@register_process_reward('cellar', 'hack')" in shown
    assert not (tmp_path / "run" / "misalignment_knob.html").exists()  # no knob, no figure


def test_02_samples_steps_by_hand_and_a_group_in_a_user_env(kernel, tmp_path):
    params = dict(USER_ENV, N_STEPS=2, GROUP_SIZE=2, MAX_STEPS=6)
    results = execute("02_trajectory_sampling", kernel, tmp_path, **params)
    assert results["prompt_tokens"] > 0 and results["n_candidates"] >= 3  # look and two ways, at least
    assert results["probs_sum"] == pytest.approx(1.0, abs=1e-5)
    assert results["manual_steps"] == 2 and 0 < results["mean_chosen_prob"] <= 1  # no escape in 2 steps
    assert results["group_size"] == 2 and 1 <= results["mean_episode_steps"] <= 6
    assert results["process_reward"] == "progress"  # the cellar has no subgoal reward: the generic one
    assert results["logprob_recompute_error"] < 1e-4
    shown = printed(tmp_path / "02_trajectory_sampling.ipynb")
    assert "Find the key and escape the cellar." in shown and "   progress: {'key': " in shown
    assert "Queries:" not in shown  # never another env's memory (WebShop's) in the prompt


# ------------------------------------------------------------------- the library pieces they call
def test_a_step_by_hand_writes_the_text_of_a_sampled_template():
    import torch

    from rspo_kit.experiments.step_by_hand import sample_action, score_candidates
    from rspo_kit.policy.prompts import EpisodeContext
    from rspo_kit.policy.rollout import Policy

    torch.set_num_threads(1)
    policy = Policy.load("tiny", seed=0)
    policy.search_query = "generate"  # the template is scored as "search[" and the model writes the query
    context = EpisodeContext(
        "webshop", "a red mug under 20 dollars", "WebShop [SEP] Search", ("search[...]",)
    )
    scores = score_candidates(policy, context)
    assert scores.actions == ["search[...]"] and float(scores.probs.sum()) == pytest.approx(1.0)
    k, action = sample_action(policy, scores, torch.Generator().manual_seed(0))
    assert k == 0 and action.startswith("search[") and action.endswith("]") and action != "search[...]"


def test_03_walks_a_loop_on_a_user_env_with_the_generic_progress_reward(kernel, tmp_path):
    params = dict(USER_ENV, **SMOKE, LOOPS=1, LOOP_STEPS=2, RUN_DIR=str(tmp_path / "run"))
    results = execute("03_reward_swap", kernel, tmp_path, **params)
    assert results["process_reward"] == "progress"  # B's dense steps trained on the generic reward
    assert results["loops"] == 1 and results["actor_updates"] == results["explorer_updates"] == 2
    assert results["collected"] == 4  # smoke: 2 collection tasks x G = 2
    assert results["replayed"] == 2 * 2  # round(α·B·N) = 2 per update of A, k = 2
    assert results["relabel_error"] == 0.0  # A saw outcome rewards only
    config = json.loads((tmp_path / "run" / "config.json").read_text())
    assert config["env"]["name"] == "cellar" and config["env"]["module"] == CELLAR


def test_04_trains_plain_on_a_user_env_whose_module_goes_into_the_config(kernel, tmp_path):
    run_dir = tmp_path / "run"
    params = dict(USER_ENV, PRESET="smoke", VARIANT="plain", ITERATIONS=1, RUN_DIR=str(run_dir))
    results = execute("04_training", kernel, tmp_path, **params, OVERRIDES={"train.final_eval_n": 2})
    assert results["iterations"] == 1 and results["env_steps"] > 0 and results["variant"] == "plain"
    assert 0 <= results["final_success"] <= 1
    config = json.loads((run_dir / "config.json").read_text())
    assert config["env"]["name"] == "cellar" and config["env"]["module"] == CELLAR


def test_05_debugs_a_run_on_a_user_env_with_and_without_a_hack_term(kernel, tmp_path):
    run_dir = tmp_path / "run"
    params = dict(USER_ENV, **SMOKE, ITERATIONS=2, MISALIGN_EPS=0.0, EVAL_N=0, RUN_DIR=str(run_dir))
    results = execute(
        "05_misalignment_debugger", kernel, tmp_path, **params, HACK="wander", EPS_VALUES=[0.0, 1.0]
    )
    assert results["trajectories"] == 8 and results["groups"] == 4  # 2 iterations x 2 tasks x G=2
    assert results["process_reward"] == "progress" and results["knob_hack"] == "wander"
    assert results["rescore_error"] < 1e-9  # the turn tables reproduce the generic reward the run recorded
    assert set(results["hacking_by_eps"]) == {"0.0", "1.0"} == set(results["tau_by_eps"])
    assert (run_dir / "misalignment" / "eps_what_if.html").is_file()

    # the same run debugged from its folder alone (its config names the module), with the default
    # hackable term "hack", which the cellar does not have: no what-if, and the reason printed
    (tmp_path / "again").mkdir()
    again = execute("05_misalignment_debugger", kernel, tmp_path / "again", DEBUG_RUN=str(run_dir))
    assert again["trajectories"] == 8 and again["rescore_error"] < 1e-9
    assert again["knob_hack"] is None and again["hacking_by_eps"] == {} == again["tau_by_eps"]
    shown = printed(tmp_path / "again" / "05_misalignment_debugger.ipynb")
    assert "no what-if: env 'cellar' has no process reward 'hack'" in shown

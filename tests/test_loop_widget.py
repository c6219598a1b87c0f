"""LoopInspector on a real loop of the paper's RSPO: its three pictures, headless and live."""

from __future__ import annotations

import plotly.io as pio
from lock_env import register_lock

from rspo_kit.train import preset, train
from rspo_widgets import LoopInspector

register_lock()


def test_the_loop_inspector_draws_bs_steps_the_swap_and_the_shifted_window(tmp_path):
    cfg = preset("smoke", env="dial", algo="grpo", swap=True)
    cfg.train.iterations, cfg.train.run_dir, cfg.train.threads = 1, str(tmp_path / "run"), 1
    seen = {}

    class Keep:
        def on_update_end(self, event):
            seen.update(event.data)

    result = train(cfg, callbacks=[Keep()])
    assert result.metrics["budget/actor_updates"].iloc[-1] == 2
    inspector = LoopInspector(seen["record"], seen["batch"], _rewards(cfg))
    for name in ("explorer", "relabel", "clip"):
        pio.from_json(inspector.figures[name].to_json())  # a valid figure spec
    explorer = inspector.figures["explorer"]
    assert list(explorer.data[0].x) == [
        "step 1",
        "step 2",
        "collection",
    ]  # k = 2 dense steps, then the collection
    relabel = inspector.figures["relabel"]
    assert sum(len(t.x) for t in relabel.data) == len(seen["record"].collection)
    drawn = sum(len(d) for d in seen["record"].drawn)
    assert len(relabel.data[1].x) == drawn > 0
    first = inspector.figures["clip"].data[1].x
    if len(inspector.windows) > 1:
        inspector.step.value = len(inspector.windows) - 1
        assert inspector.last_error is None
        assert tuple(inspector.figures["clip"].data[1].x) == (
            inspector.windows.iloc[-1]["low"],
            inspector.windows.iloc[-1]["high"],
        )
    assert len(first) == 2
    html = inspector.static_html(include_plotlyjs=False)
    assert "B's k dense steps" in html and "the swap" in html


def _rewards(cfg):
    from rspo_kit.train.rewards import run_rewards

    return run_rewards(cfg)

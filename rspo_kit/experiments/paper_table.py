"""The paper's Table 1 beside ours: ALFWorld success by task kind, WebShop score and success, each
algorithm plain and under RSPO, our runs' numbers with their intervals and the paper's beside them.

The paper (Qwen2.5-1.5B-Instruct, 3 seeds, 150 updates of A) reports each cell as mean ± spread over
its seeds; ours are the tiny model's at our budgets, so the comparison is of direction and size, not
of level. For every (env, algorithm) a study folder holds the cells (``Study``: an archive or sweep
folder whose cells vary ``variant`` and ``train.seed``; plain's cells may come from a second folder,
e.g. plain run on to RSPO's env steps), and ``table_one`` writes, per algorithm:

- X and RSPO-X, ours: the mean over seeds of each column, with its 95% t-interval over the seeds;
- RSPO − X, seed-paired: the difference seed by seed, its mean and 95% t-interval (about the
  algorithm);
- RSPO − X, task-paired: each task's difference averaged over the seeds (and samples), the mean over
  the column's tasks and its 95% t-interval (about these runs on these tasks);
- the paper's X, RSPO-X (mean ± its reported spread) and their difference.

One evaluation at a time (``final_sampled/eval_unseen``: the sampled policy RL optimises, on the
split of unseen rooms): ``python -m rspo_kit.experiments.paper_table --study ENV ALGO DIR [PLAIN_DIR]
... --evaluation final/eval``.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import pandas as pd

from rspo_kit.experiments.grid import SEED_KEY
from rspo_kit.experiments.intervals import mean_ci
from rspo_kit.experiments.pooling import cell_episodes, pooled_sweep
from rspo_kit.experiments.tables import cells_frame

# the paper's names of ALFWorld's six task kinds, in its column order
ALFWORLD_KINDS: dict[str, str] = {
    "Pick": "pick_and_place_simple",
    "Look": "look_at_obj_in_light",
    "Clean": "pick_clean_then_place_in_recep",
    "Heat": "pick_heat_then_place_in_recep",
    "Cool": "pick_cool_then_place_in_recep",
    "Pick2": "pick_two_obj_and_place",
}
ENV_COLUMNS: dict[str, tuple[str, ...]] = {"alfworld": (*ALFWORLD_KINDS, "All"), "webshop": ("Score", "SR")}
COLUMNS: tuple[str, ...] = tuple(c for cols in ENV_COLUMNS.values() for c in cols)
ALGORITHMS: dict[str, str] = {"grpo": "GRPO", "gigpo": "GiGPO", "ppo": "PPO"}
VARIANTS = ("plain", "rspo")
DEFAULT_EVALUATION = "final_sampled/eval_unseen"

# The paper's Table 1 at 1.5B (percent; WebShop's score in points of 100): per algorithm and variant,
# the columns of COLUMNS as (mean, spread over its 3 seeds as it reports it).
_PAPER_ROWS = {
    ("grpo", "plain"): "81.3 7.4 58.1 23.7 85.8 5.9 59.5 9.2 68.1 13.5 41.0 15.5 69.0 7.1 83.3 1.4 65.1 5.9",
    ("grpo", "rspo"): "81.0 5.8 64.6 9.3 81.5 8.6 73.1 15.8 74.7 3.2 65.9 4.3 74.7 1.2 85.8 0.5 70.6 4.3",
    ("gigpo", "plain"): "98.2 3.0 70.2 11.4 96.3 0.7 86.5 5.6 84.1 8.8 79.2 13.0 88.8 1.6 82.5 6.7 67.4 7.8",
    ("gigpo", "rspo"): "92.9 3.7 85.4 4.9 97.4 2.3 94.9 5.0 89.8 5.9 73.6 17.9 90.4 1.2 88.2 2.4 75.3 3.9",
    ("ppo", "plain"): "78.5 9.3 67.7 4.6 77.7 7.4 66.1 7.9 70.7 9.1 38.0 3.1 68.0 7.5 74.4 8.3 57.3 4.6",
    ("ppo", "rspo"): "83.0 2.8 56.1 6.9 88.8 2.1 74.6 4.5 80.0 8.8 58.9 7.8 76.6 2.8 84.3 2.1 69.3 6.6",
}


def _paper_row(text: str) -> dict[str, tuple[float, float]]:
    values = [float(v) for v in text.split()]
    return {c: (values[2 * i], values[2 * i + 1]) for i, c in enumerate(COLUMNS)}


PAPER_1P5B: dict[tuple[str, str], dict[str, tuple[float, float]]] = {
    key: _paper_row(text) for key, text in _PAPER_ROWS.items()
}


@dataclass(frozen=True)
class Study:
    """Where one (env, algorithm)'s cells are: RSPO's (and plain's) in ``folder``, plain's in
    ``plain_folder`` where it is given (then plain's cells of ``folder`` are not read)."""

    env: str
    algo: str
    folder: Path
    plain_folder: Path | None = None

    def __post_init__(self) -> None:
        if self.env not in ENV_COLUMNS:
            raise ValueError(f"env {self.env!r}: Table 1 has {sorted(ENV_COLUMNS)}")
        if self.algo not in ALGORITHMS:
            raise ValueError(f"algorithm {self.algo!r}: Table 1 has {sorted(ALGORITHMS)}")


def column_values(episodes: pd.DataFrame, env: str) -> dict[str, pd.DataFrame]:
    """Per column of ``env``, the episodes it averages (``task_id``, ``sample``, ``value``): success
    (won, 0 or 1) of each ALFWorld kind and of all tasks; WebShop's score (points) and success.

    >>> ep = pd.DataFrame({"task_id": ["a", "b"], "sample": 0, "kind": ["look_at_obj_in_light",
    ...     "pick_and_place_simple"], "won": [True, False], "score": [1.0, 0.0]})
    >>> {c: v["value"].tolist() for c, v in column_values(ep, "alfworld").items() if len(v)}
    {'Pick': [0.0], 'Look': [1.0], 'All': [1.0, 0.0]}
    """
    keys = episodes[["task_id", "sample"]]
    won = keys.assign(value=episodes["won"].astype(float))
    if env == "webshop":
        return {"Score": keys.assign(value=episodes["score"].astype(float)), "SR": won}
    columns = {name: won[episodes["kind"] == kind] for name, kind in ALFWORLD_KINDS.items()}
    return {**columns, "All": won}


def _cells(study: Study, evaluation: str) -> dict[str, dict[object, pd.DataFrame]]:
    """Per variant, each seed's episodes of ``evaluation`` (as the cells recorded them)."""
    found: dict[str, dict[object, pd.DataFrame]] = {v: {} for v in VARIANTS}
    sources = [(study.folder, VARIANTS if study.plain_folder is None else ("rspo",))]
    if study.plain_folder is not None:
        sources.append((study.plain_folder, ("plain",)))
    for folder, variants in sources:
        manifest, rows, folders = pooled_sweep([folder])
        if not rows:
            continue
        table = cells_frame(rows, manifest["keys"])
        for key in ("variant", SEED_KEY):
            if key not in table:
                raise ValueError(f"{folder}: its cells do not vary {key!r}; Table 1 pairs variants by seed")
        ran = set(table["algo"].dropna()) if "algo" in table else set()
        if ran - {study.algo}:
            raise ValueError(f"{folder}: its cells ran {sorted(ran)}, not {study.algo!r}")
        table = table[table["variant"].isin(variants)]
        episodes = cell_episodes(folders, table["cell"].tolist())
        for _, row in table.iterrows():
            if row["cell"] not in episodes:
                raise ValueError(f"{folder}: cell {row['cell']} recorded no final episodes")
            ep = episodes[row["cell"]]
            ep = ep[ep["evaluation"] == evaluation]
            if ep.empty:
                raise ValueError(f"{folder}: cell {row['cell']} has no {evaluation!r} episodes")
            found[row["variant"]][row[SEED_KEY]] = ep
    return found


def _interval(mean: float, low: float, high: float, scale: float, signed: bool = False) -> str:
    sign = "+" if signed else ""
    if pd.isna(mean):
        return "—"
    if pd.isna(low):
        return f"{scale * mean:{sign}.1f}"
    return f"{scale * mean:{sign}.1f} [{scale * low:{sign}.1f}, {scale * high:{sign}.1f}]"


def _scale(column: str) -> float:
    return 1.0 if column == "Score" else 100.0


def study_rows(study: Study, evaluation: str = DEFAULT_EVALUATION) -> dict[str, dict[str, str]]:
    """Our four rows of one study (plain, RSPO, RSPO − plain by seed and by task), each column's text;
    columns another env holds are left out. Seeds that lack one variant are left out of the pairs."""
    cells = _cells(study, evaluation)
    columns = ENV_COLUMNS[study.env]
    per_seed = {
        v: {s: column_values(ep, study.env) for s, ep in sorted(cells[v].items(), key=lambda x: str(x[0]))}
        for v in VARIANTS
    }
    paired = [s for s in per_seed["rspo"] if s in per_seed["plain"]]
    rows: dict[str, dict[str, str]] = {"plain": {}, "rspo": {}, "seed-paired": {}, "task-paired": {}}
    for c in columns:
        k = _scale(c)
        means = {v: {s: float(cols[c]["value"].mean()) for s, cols in per_seed[v].items()} for v in VARIANTS}
        for v in VARIANTS:
            rows[v][c] = _interval(*mean_ci(list(means[v].values())), k)
        rows["seed-paired"][c] = _interval(
            *mean_ci([means["rspo"][s] - means["plain"][s] for s in paired]), k, signed=True
        )
        if paired:
            joined = pd.concat(
                [
                    per_seed["rspo"][s][c].merge(per_seed["plain"][s][c], on=["task_id", "sample"])
                    for s in paired
                ],
                ignore_index=True,
            )
            per_task = (joined["value_x"] - joined["value_y"]).groupby(joined["task_id"]).mean()
            rows["task-paired"][c] = _interval(*mean_ci(per_task.tolist()), k, signed=True)
        else:
            rows["task-paired"][c] = "—"
    seeds = {v: len(per_seed[v]) for v in VARIANTS}
    rows["seeds"] = {"plain": str(seeds["plain"]), "rspo": str(seeds["rspo"]), "paired": str(len(paired))}
    return rows


def paper_rows(algo: str) -> dict[str, dict[str, str]]:
    """The paper's three rows of ``algo`` at 1.5B: X, RSPO-X (mean ± spread) and RSPO − X."""
    plain, rspo = PAPER_1P5B[(algo, "plain")], PAPER_1P5B[(algo, "rspo")]
    return {
        "plain": {c: f"{m:.1f} ± {s:.1f}" for c, (m, s) in plain.items()},
        "rspo": {c: f"{m:.1f} ± {s:.1f}" for c, (m, s) in rspo.items()},
        "difference": {c: f"{rspo[c][0] - plain[c][0]:+.1f}" for c in COLUMNS},
    }


def table_one(studies: Sequence[Study], evaluation: str = DEFAULT_EVALUATION) -> str:
    """The Markdown table shaped like the paper's Table 1 (see the module docstring): per algorithm in
    the paper's order, our rows from ``studies`` (``not run`` where no study gives an env) and the
    paper's 1.5B rows; then a line naming each study's folders and seeds."""
    by_key: dict[tuple[str, str], Study] = {}
    for study in studies:
        if (study.env, study.algo) in by_key:
            raise ValueError(f"two studies of {study.env} {study.algo}")
        by_key[(study.env, study.algo)] = study
    header = ["algorithm", "row", "source", *COLUMNS]
    lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    notes = []
    for algo, name in ALGORITHMS.items():
        ours: dict[str, dict[str, str]] = {r: {} for r in ("plain", "rspo", "seed-paired", "task-paired")}
        ran = False
        for env in ENV_COLUMNS:
            study = by_key.get((env, algo))
            if study is None:
                continue
            rows = study_rows(study, evaluation)
            ran = True
            for r in ours:
                ours[r].update(rows[r])
            plain = study.plain_folder or study.folder
            seeds = rows["seeds"]
            notes.append(
                f"{env} {name}: RSPO {study.folder} ({seeds['rspo']} seeds), plain {plain} "
                f"({seeds['plain']} seeds), {seeds['paired']} paired"
            )
        labels = {
            "plain": (name, "ours: mean [95% CI over seeds]"),
            "rspo": (f"RSPO-{name}", "ours: mean [95% CI over seeds]"),
            "seed-paired": (f"RSPO − {name}", "ours: seed-paired"),
            "task-paired": (f"RSPO − {name}", "ours: task-paired"),
        }
        for r, (row, source) in labels.items():
            cells = [ours[r].get(c, "not run") if ran else "not run" for c in COLUMNS]
            lines.append("| " + " | ".join([name, row, source, *cells]) + " |")
        paper = paper_rows(algo)
        for r, row in (("plain", name), ("rspo", f"RSPO-{name}"), ("difference", f"RSPO − {name}")):
            source = "paper, 1.5B: mean ± spread" if r != "difference" else "paper, 1.5B"
            lines.append("| " + " | ".join([name, row, source, *paper[r].values()]) + " |")
    caption = (
        f"Evaluation {evaluation}: success in percent, WebShop's score in points of 100; one episode a "
        "task. The paper's columns: Qwen2.5-1.5B-Instruct, 150 updates of A, 3 seeds."
    )
    return "\n".join([caption, "", *lines, "", *(f"- {n}" for n in notes)])


def _study(values: Sequence[str]) -> Study:
    if len(values) not in (3, 4):
        raise ValueError(f"--study takes ENV ALGO DIR [PLAIN_DIR], got {' '.join(values)!r}")
    env, algo, folder, *plain = values
    return Study(env, algo, Path(folder), Path(plain[0]) if plain else None)


def main(argv: Sequence[str] | None = None) -> int:
    ap = argparse.ArgumentParser(
        prog="python -m rspo_kit.experiments.paper_table",
        description="The paper's Table 1 beside our runs: ALFWorld success by task kind, WebShop score "
        "and success, plain and RSPO, with seed-paired and task-paired 95% intervals.",
    )
    ap.add_argument(
        "--study",
        nargs="+",
        action="append",
        required=True,
        metavar="ARG",
        help="ENV ALGO DIR [PLAIN_DIR]: the cells of one env and algorithm (e.g. webshop gigpo "
        "results/webshop_paper_loop/archive_equal_updates); plain's from PLAIN_DIR where given (repeatable)",
    )
    ap.add_argument(
        "--evaluation",
        default=DEFAULT_EVALUATION,
        help=f"the final evaluation to tabulate (default {DEFAULT_EVALUATION}; e.g. final/eval)",
    )
    args = ap.parse_args(argv)
    try:
        print(table_one([_study(s) for s in args.study], args.evaluation))
    except (FileNotFoundError, ValueError) as err:
        print(f"error: {err}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

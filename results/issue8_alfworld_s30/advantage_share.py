"""Where each cell's positive advantage goes: to steps of won episodes, or of failed ones.

Reads every iteration's turn table (turns/iter_*.parquet, actor rows) of the finished cells of live sweep
folders (the archives keep no turns) and gives, per cell and over its whole run:
  - failed_pos_share: the share of the positive advantage mass (Σ adv over steps with adv > 0) on steps of
    episodes that failed. Plain GRPO's is 0 by construction (a failure's return is never above its group's
    mean on a 0/1 outcome); a dense reward in the return makes it positive.
  - won_adv: the mean advantage of a won episode's step; failed_adv: of a failed episode's step.
  - pos_failed_eps: the share of failed episodes whose steps have positive advantage on average.
The sweep's PPO cells (checkout 0f94b38) wrote no advantages to their turn tables (its critic computes them
inside the update; the trainer records them since session 32), so such cells are named and skipped.

A machine's sweep folder goes with the machine, so the rows measured so far are kept in a CSV (--csv): the
folders' cells replace their rows there, the others stay, and the whole table is printed as markdown:

    .venv/bin/python results/issue8_alfworld_s30/advantage_share.py runs/sweeps/s34_alfworld_D \
        > results/issue8_alfworld_s29/advantage_share.md
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import pandas as pd

from rspo_kit.records import load_turns

KEPT = "results/issue8_alfworld_s29/advantage_share.csv"


def cell_share(cell: Path) -> dict[str, float]:
    turns = load_turns(cell)
    turns = turns[turns.role == "actor"]
    if turns.advantage.isna().all():
        return {}  # PPO before session 32: its advantages came from the critic inside the update, unrecorded
    positive = turns.advantage.clip(lower=0)
    failed = ~turns.won.astype(bool)
    episodes = turns.groupby(["group_id", "traj_id"]).agg(adv=("advantage", "mean"), won=("won", "first"))
    lost = episodes[~episodes.won.astype(bool)]
    return {
        "failed_pos_share": positive[failed].sum() / max(positive.sum(), 1e-12),
        "won_adv": turns.advantage[~failed].mean(),
        "failed_adv": turns.advantage[failed].mean(),
        "pos_failed_eps": (lost.adv > 0).mean(),
        "steps": len(turns),
    }


def folder_rows(folder: Path) -> list[dict]:
    rows = []
    for cell in sorted(folder.iterdir()):
        if (cell / "results.json").exists() and (cell / "turns").is_dir():
            share = cell_share(cell)
            if share:
                rows.append({"cell": cell.name, "folder": folder.name, **share})
            else:
                print(
                    f"{cell.name}: no advantages in its turn tables (PPO before session 32)", file=sys.stderr
                )
    return rows


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("folders", nargs="*", type=Path, help="live sweep folders (with turns/)")
    parser.add_argument("--csv", type=Path, default=Path(KEPT), help="the rows kept so far; updated in place")
    args = parser.parse_args(argv)
    kept = pd.read_csv(args.csv) if args.csv.exists() else pd.DataFrame()
    new = pd.DataFrame([row for folder in args.folders for row in folder_rows(folder)])
    if not new.empty and not kept.empty:
        kept = kept[~kept.cell.isin(new.cell)]
    table = pd.concat([kept, new], ignore_index=True).sort_values("cell", ignore_index=True)
    if table.empty:
        sys.exit("no cell with recorded advantages in the folders given, and no kept rows")
    table.to_csv(args.csv, index=False)
    print("| " + " | ".join(table.columns) + " |")
    print("|" + "---|" * len(table.columns))
    for row in table.itertuples(index=False):
        print("| " + " | ".join(f"{v:.3f}" if isinstance(v, float) else str(v) for v in row) + " |")


if __name__ == "__main__":
    main()

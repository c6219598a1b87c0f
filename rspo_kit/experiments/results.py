"""Print what executed notebooks recorded: ``python -m rspo_kit.experiments.results NOTEBOOK...``.

One table per notebook, key and value (long lists shortened), read with
``rspo_kit.records.read_results`` from the ``RSPO_RESULTS`` line its last cell printed.
"""

from __future__ import annotations

import sys

from rspo_kit.records.notebook import NoResults, read_results


def _show(value) -> str:
    if isinstance(value, float):
        return f"{value:.4g}"
    if isinstance(value, list) and len(value) > 6:
        return f"[{', '.join(_show(v) for v in value[:3])}, ... {len(value)} values]"
    if isinstance(value, list):
        return f"[{', '.join(_show(v) for v in value)}]"
    if isinstance(value, dict):
        return "{" + ", ".join(f"{k}: {_show(v)}" for k, v in value.items()) + "}"
    return str(value)


def main(argv: list[str] | None = None) -> int:
    """Print each executed notebook's results; exit status 1 if one has none."""
    paths = sys.argv[1:] if argv is None else argv
    if not paths:
        print("usage: python -m rspo_kit.experiments.results EXECUTED_NOTEBOOK [...]", file=sys.stderr)
        return 2
    status = 0
    for path in paths:
        try:
            results = read_results(path)
        except NoResults as err:
            print(f"{path}: no results ({err})", file=sys.stderr)
            status = 1
            continue
        width = max(map(len, results), default=0)
        print(f"results of {path}")
        for key, value in results.items():
            print(f"  {key:<{width}}  {_show(value)}")
    return status


if __name__ == "__main__":
    raise SystemExit(main())

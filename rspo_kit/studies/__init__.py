"""The code of this repository's own studies, each module named for the study it serves.

- ``regime_map``: the regime map of ``results/regime_map`` (notebook 07): where RSPO's reward swap
  pays, over difficulty × misalignment × explorer setting on the chain testbed;
- ``quickstart``: the quickstart's comparison (notebook 00, ``make demo``), its protocol, its runs
  and its headless runner ``python -m rspo_kit.studies.quickstart``; ``quickstart_tables``: what the
  notebook shows of those runs.

These modules build on the library: what a user's own sweep needs (running, aggregating, reporting,
archiving, success by task kind) stays in ``rspo_kit.experiments``.
"""

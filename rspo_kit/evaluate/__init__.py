"""Evaluate a policy from the command line: ``python -m rspo_kit.evaluate --policy P --env alfworld``.

``P`` is a preset name, a saved policy folder, or a training run's folder (its actor at the latest
checkpoint). The CLI sits above ``rspo_kit.policy`` and ``rspo_kit.train`` because it loads from
both; the library function is ``rspo_kit.policy.evaluate.evaluate``.
"""

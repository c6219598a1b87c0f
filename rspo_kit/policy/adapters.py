"""Actor and explorer: the two policies RSPO keeps, and the frozen reference for KL.

Pretrained models carry two named LoRA adapters, ``actor`` and ``explorer``, on one base model (peft);
``disable_adapter()`` gives the frozen base as the reference, at no cost. Tiny scratch models are fully
fine-tuned, so the explorer is a second copy and the reference a third, frozen one, kept only when asked
for (``reference=True``: a KL penalty needs it). Either way ``sync_explorer()`` (B <- A, the first
step of each loop of the paper's Algorithm 1: docs/training.md) is one call.
"""

from __future__ import annotations

import copy
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import replace
from typing import Literal

import torch

from rspo_kit.policy.rollout import Policy

Role = Literal["actor", "explorer"]


class ActorExplorer:
    """``pair.policy("actor")`` / ``pair.policy("explorer")``; ``with pair.reference():`` for KL."""

    def __init__(
        self,
        base: Policy,
        lora: bool = False,
        rank: int = 16,
        alpha: int = 32,
        dropout: float = 0.0,
        reference: bool = True,
    ):
        """``base`` becomes the actor (trained in place). ``reference=False`` skips the frozen copy of
        full fine-tuning (a third model) where no KL penalty reads it; LoRA's reference is always there."""
        self.lora = lora
        if lora:
            from peft import LoraConfig, get_peft_model

            config = LoraConfig(
                r=rank,
                lora_alpha=alpha,
                lora_dropout=dropout,
                target_modules="all-linear",
                task_type="CAUSAL_LM",
            )
            model = get_peft_model(base.model, config, adapter_name="actor")
            model.add_adapter("explorer", config)
            self._models = {"actor": model, "explorer": model}
            self._reference = None
        else:
            self._models = {"actor": base.model, "explorer": copy.deepcopy(base.model)}
            self._reference = copy.deepcopy(base.model).requires_grad_(False).eval() if reference else None
        self._base = base
        self.sync_explorer()

    def policy(self, role: Role) -> Policy:
        """The Policy of a role (for LoRA this also makes its adapter the active one)."""
        model = self._models[role]
        if self.lora:
            model.set_adapter(role)
        return replace(self._base, model=model)

    def parameters(self, role: Role) -> list[torch.nn.Parameter]:
        """The trainable parameters of a role (its adapter for LoRA, the whole copy otherwise)."""
        model = self._models[role]
        if not self.lora:
            return list(model.parameters())
        return [p for n, p in model.named_parameters() if f".{role}." in n]

    @torch.no_grad()
    def sync_explorer(self) -> None:
        """Explorer <- actor (weights, or the actor adapter's weights into the explorer adapter)."""
        if not self.lora:
            self._models["explorer"].load_state_dict(self._models["actor"].state_dict())
            return
        params = dict(self._models["actor"].named_parameters())
        for name, p in params.items():
            if ".actor." in name:
                params[name.replace(".actor.", ".explorer.")].copy_(p)

    @contextmanager
    def reference(self) -> Iterator[Policy]:
        """The frozen reference policy (the starting model), for KL penalties.

        With LoRA the adapters are off only inside the ``with`` block: open it around the reference's
        own forward passes, not around the actor's.
        """
        if self.lora:
            with self._models["actor"].disable_adapter():
                yield replace(self._base, model=self._models["actor"])
        elif self._reference is None:
            raise RuntimeError("this ActorExplorer keeps no reference copy: build it with reference=True")
        else:
            yield replace(self._base, model=self._reference)

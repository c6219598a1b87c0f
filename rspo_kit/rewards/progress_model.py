"""The paper's learned dense reward (§4.2.3, after SPA-RL): a progress model on a frozen LM's hidden states.

r̂_t = tanh(MLP(h_t)), h_t the last hidden state of a frozen causal LM reading step t (its context s_t
and action a_t), trained so that the trajectory's sum R̂ = Σ_t r̂_t regresses its outcome R ∈ [0, 1]
by mean squared error, L = (1/N) Σ_i (R̂_i − R_i)² (paper Eq. 6-7). GRPO and GiGPO take R̂ as a
trajectory's dense reward; per step it is a process reward like any other.

**What the encoder reads.** Step t of a rollout (``policy.rollout.Step``) holds ``prompt_ids``, the
policy's prompt at that step (chat template, memory, recent history, the observation, the task: the
context s_t as the policy saw it), and ``action_ids``, the action a_t it took (with its end-of-turn
token). The encoder reads ``prompt_ids + action_ids`` and h_t is the final layer's state (after the
final norm) at the last token, the one that has seen all of s_t and a_t. Where the encoder's
tokenizer is not the policy's, those ids are decoded with the policy's tokenizer, special tokens kept
(ChatML markers map onto an encoder of that family), and tokenized again with the encoder's. A
sequence longer than the encoder's positions keeps its end. The encoder never trains: its parameters
have ``requires_grad`` False and it runs in eval mode under ``torch.no_grad``.

**Contract** (what the trainer and notebooks rely on):

- ``ProgressModel``: ``encoder`` (a ``FrozenEncoder``: ``name``, the id it was loaded from, and
  ``digest``, the SHA-256 of its weights as ``policy.models.weights_digest`` computes it), ``head``
  (a ``ProgressHead``), ``step_rewards(trajs, policy_tokenizer=None) -> list[list[float]]`` (one
  batched pass over every step of ``trajs``), ``trajectory_rewards(trajs)`` (R̂ per trajectory),
  ``save(folder)`` and ``ProgressModel.load(folder, encoder=None, device="auto")``. A folder holds
  ``progress_head.safetensors`` (the head's tensors) and ``progress_model.json`` (format, architecture,
  encoder id and digest, each head tensor's SHA-256, the training-data summary, the fit and its
  report). ``load`` raises ``RecordError`` naming the file for a missing, damaged or malformed file, a
  tensor of the wrong name or shape, a head tensor whose digest differs, or an encoder whose weights
  digest or hidden size is not the one the head was trained on; it never falls back to anything.
- ``use_progress_model(model, env, policy_tokenizer=None)`` registers the model as the trajectory
  process reward ``"progress_model"`` of ``env``; after it ``RewardModel.build(env,
  process="progress_model")`` scores ``process_steps(traj)`` and ``batch_rewards(trajs, "process" |
  "mix")`` with r̂_t, batched over all steps of the batch and remembered per trajectory object (a
  second call on the same objects encodes nothing). ``policy_tokenizer``: the tokenizer that wrote the
  steps' ``prompt_ids``; None (or one with the encoder's vocabulary) reads the ids as they are, which
  is right when the encoder is the policy's warm start.
- ``committed_progress_model(env)``: the folder of the weights committed under
  ``data/progress_models/<env>/``, or None.
- In a run: ``reward.process = "progress_model"`` with ``reward.progress_model`` naming a folder (None:
  the committed one) makes it the dense reward wherever a process reward goes (the dense baseline,
  mix, the explorer of the paper's loop); ``reward.process = "auto"`` picks it for the paper's loop
  where weights are committed (``auto_process_reward``). ``step_comparison`` lays its r̂_t beside the
  hand-written reward for notebook 05 (``rspo_kit.experiments.dense_hacking`` reads the paper's
  Figure 3 axes off runs trained on it alone).

Train one from the command line (episodes of the env's committed warm start on train tasks, the
encoder's states cached so that a refit takes seconds)::

    python -m rspo_kit.rewards.progress_model train --env alfworld --out data/progress_models/alfworld
    python -m rspo_kit.rewards.progress_model report data/progress_models/alfworld

Why one module of this length: the encoder, the head, the saved model and its checks, the process-reward
adapter and the CLI make one artefact (a weights file is only valid with the encoder digest, head
digests and data record written and checked here); the data it is fitted on lives in ``progress_data``.
"""

from __future__ import annotations

import argparse
import copy
import hashlib
import json
import math
import os
import sys
import time
import weakref
from collections.abc import Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import pandas as pd
import torch
from torch import nn

from rspo_kit.paths import atomic_write_text, cache_dir, data_dir, repository_path
from rspo_kit.records.files import RecordError, read_json, require_keys
from rspo_kit.rewards.process import register_trajectory_reward
from rspo_kit.rewards.progress_data import (
    OUTCOME_MODE,
    WARM_STARTS,
    CollectSpec,
    Episode,
    StepData,
    collect_episodes,
    scorer_report,
    split_by_task,
    trajectory_sums,
)

FORMAT = "rspo_kit.progress_model/1"
HEAD_FILE = "progress_head.safetensors"
META_FILE = "progress_model.json"
PROCESS_NAME = "progress_model"  # the process reward's name: RewardModel.build(env, process=PROCESS_NAME)
DATA_VERSION = 1  # bump when collection or encoding changes what a cached step table holds


# ----------------------------------------------------------------------------------- the encoder


def encoder_digest(model: nn.Module) -> str:
    """SHA-256 of a model's weights, read as float32: ``policy.models.weights_digest`` for a float32
    model (the digest data/warm_starts/README.md quotes), and the same for that model loaded in
    bf16 on a GPU from bf16 weights, so a head trained on one device loads on the other."""
    h = hashlib.sha256()
    for name, tensor in sorted(model.state_dict().items()):
        t = tensor.detach().to("cpu")
        t = (t.float() if t.is_floating_point() else t).contiguous()
        h.update(f"{name}|{t.dtype}|{tuple(t.shape)}|".encode())
        h.update(t.reshape(-1).view(torch.uint8).numpy().tobytes())
    return h.hexdigest()


def same_vocabulary(a: Any, b: Any) -> bool:
    """Whether two tokenizers map every token to the same id (then ids need no translation)."""
    return a is b or (len(a) == len(b) and a.get_vocab() == b.get_vocab())


@dataclass(eq=False)
class FrozenEncoder:
    """A causal LM read for its last hidden state at the last token of a step; never trained."""

    name: str  # as given: a policy preset, a folder (relative to the repository), or a HF id
    model: nn.Module
    tokenizer: Any
    digest: str
    max_tokens: int
    batch_tokens: int = 8192  # tokens per forward pass (padded), bounding memory

    @classmethod
    def load(cls, name: str, device: str = "auto", max_tokens: int | None = None) -> FrozenEncoder:
        """Any ``rspo_kit.policy`` preset (``tiny``, ``smollm2-135m``), a policy folder, or a Hugging
        Face path already on disk (nothing is downloaded); frozen and in eval mode."""
        from rspo_kit.policy.device import resolve_device
        from rspo_kit.policy.models import load_model
        from rspo_kit.policy.scoring import max_positions

        folder = repository_path(name)
        model, tokenizer = load_model(str(folder) if folder.is_dir() else name, resolve_device(device))
        model.requires_grad_(False)
        model.eval()
        limit = max_positions(model) or 2048
        return cls(str(name), model, tokenizer, encoder_digest(model), min(limit, max_tokens or limit))

    @property
    def dim(self) -> int:
        return int(self.model.config.hidden_size)

    def step_tokens(self, step: Any, policy_tokenizer: Any = None) -> list[int]:
        """The encoder's tokens of one step: the policy's prompt then its action (module docstring)."""
        prompt, action = getattr(step, "prompt_ids", None), getattr(step, "action_ids", None)
        if prompt is None:
            raise TypeError(
                f"the progress model reads a step's prompt_ids and action_ids (policy.rollout.Step); got {type(step).__name__}"
            )
        ids = [*prompt, *(action or [])]
        if policy_tokenizer is not None:
            text = policy_tokenizer.decode(ids, skip_special_tokens=False)
            ids = self.tokenizer(text, add_special_tokens=False)["input_ids"]
        elif ids and max(ids) >= len(self.tokenizer):
            raise ValueError(
                f"token id {max(ids)} is outside the encoder's vocabulary ({len(self.tokenizer)} tokens): the steps "
                f"were written by another tokenizer; pass it as policy_tokenizer"
            )
        if not ids:
            raise ValueError("a step with no prompt and no action tokens has nothing to encode")
        return ids[-self.max_tokens :]

    def states(self, sequences: Sequence[Sequence[int]], progress_bar: bool = False) -> torch.Tensor:
        """(S, D) float32 on the CPU: h at the last token of each sequence. Sequences are sorted by
        length and left-padded in batches of at most ``batch_tokens`` tokens; positions count from
        each sequence's first real token, so padding does not move them."""
        from tqdm.auto import tqdm

        from rspo_kit.policy.scoring import left_pad, positions

        order = sorted(range(len(sequences)), key=lambda i: len(sequences[i]))
        out = torch.empty(len(sequences), self.dim)
        device = next(self.model.parameters()).device
        pad_id = self.tokenizer.pad_token_id
        bar = tqdm(total=len(order), desc="encoder states", disable=not progress_bar, leave=False)
        start = 0
        with torch.no_grad():
            while start < len(order):
                end = start + 1  # grow the batch while its padded size (longest x count) fits
                while (
                    end < len(order) and len(sequences[order[end]]) * (end - start + 1) <= self.batch_tokens
                ):
                    end += 1
                chunk = order[start:end]
                ids, mask = left_pad([sequences[i] for i in chunk], pad_id, device)
                hidden = self.model.base_model(
                    input_ids=ids, attention_mask=mask, position_ids=positions(mask)
                ).last_hidden_state  # (B, L, D)
                out[chunk] = hidden[:, -1].float().cpu()
                start += len(chunk)
                bar.update(len(chunk))
        bar.close()
        return out


# -------------------------------------------------------------------------------------- the head


class ProgressHead(nn.Module):
    """r̂ = tanh(MLP((h − mean) / scale)): (S, D) encoder states -> (S,) step rewards in (−1, 1).

    ``mean`` and ``scale`` standardise each dimension by the training states (a final RMSNorm leaves
    dimensions on very different scales); ``hidden`` = 0 makes the MLP one linear layer.
    """

    def __init__(self, dim: int, hidden: int = 64) -> None:
        super().__init__()
        self.dim, self.hidden = dim, hidden
        self.register_buffer("mean", torch.zeros(dim))
        self.register_buffer("scale", torch.ones(dim))
        layers: list[nn.Module] = (
            [nn.Linear(dim, hidden), nn.ReLU(), nn.Linear(hidden, 1)] if hidden else [nn.Linear(dim, 1)]
        )
        self.mlp = nn.Sequential(*layers)

    def forward(self, states: torch.Tensor) -> torch.Tensor:
        return torch.tanh(self.mlp((states - self.mean) / self.scale).squeeze(-1))  # (S,)

    def architecture(self) -> dict[str, Any]:
        return {
            "head": "tanh(MLP((h - mean) / scale))",
            "dim": self.dim,
            "hidden": self.hidden,
            "activation": "relu",
            "tensors": {k: list(v.shape) for k, v in self.state_dict().items()},
        }


def progress_loss(
    step_rewards: torch.Tensor, step_traj: torch.Tensor, outcomes: torch.Tensor
) -> torch.Tensor:
    """L = (1/N) Σ_i (Σ_t r̂_{i,t} − R_i)²: step rewards (S,), their trajectory ids (S,), outcomes (N,).

    >>> progress_loss(torch.tensor([0.2, 0.3, -0.1]), torch.tensor([0, 0, 1]), torch.tensor([1.0, 0.0]))
    tensor(0.1300)
    """
    predicted = trajectory_sums(step_rewards, step_traj, outcomes.shape[0])  # Eq. 6: R̂_i = Σ_t r̂_{i,t}
    return (predicted - outcomes).pow(2).mean()  # Eq. 7


@dataclass(frozen=True)
class HeadConfig:
    """How ``fit_head`` trains the head: full-batch AdamW on the cached states, stopped early on the
    ``valid`` split's MSE (the best epoch's weights are kept)."""

    hidden: int = 64
    lr: float = 3e-3
    weight_decay: float = 1e-2
    max_epochs: int = 3000
    patience: int = 200  # epochs without a better valid MSE before stopping
    seed: int = 0

    def __post_init__(self) -> None:
        checks = {
            "hidden": self.hidden >= 0,
            "lr": math.isfinite(self.lr) and self.lr > 0,
            "weight_decay": math.isfinite(self.weight_decay) and self.weight_decay >= 0,
            "max_epochs": self.max_epochs >= 1,
            "patience": self.patience >= 1,
        }
        for name, ok in checks.items():
            if not ok:
                raise ValueError(
                    f"HeadConfig.{name} = {getattr(self, name)!r} is not allowed (hidden >= 0, lr > 0, "
                    "weight_decay >= 0, max_epochs >= 1, patience >= 1)"
                )


@dataclass
class FitResult:
    head: ProgressHead
    best_epoch: int
    epochs: int
    train_mse: float
    valid_mse: float
    seconds: float


def fit_head(
    train: StepData, valid: StepData, cfg: HeadConfig = HeadConfig(), *, progress_bar: bool = False
) -> FitResult:
    """Fit a ``ProgressHead`` on ``train``'s states so that Σ_t r̂_t regresses R (``progress_loss``);
    deterministic for a given ``cfg.seed``, the global RNG untouched."""
    from tqdm.auto import tqdm

    start = time.perf_counter()
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(cfg.seed)
        head = ProgressHead(train.states.shape[1], cfg.hidden)
        head.mean.copy_(train.states.mean(0))
        head.scale.copy_(train.states.std(0).clamp_min(1e-6))
        with torch.no_grad():  # start near r̂ = 0: a long episode's sum starts near 0, not near ±T
            head.mlp[-1].weight.mul_(0.1)
            head.mlp[-1].bias.zero_()
    optimizer = torch.optim.AdamW(head.parameters(), lr=cfg.lr, weight_decay=cfg.weight_decay)
    best = (math.inf, 0, copy.deepcopy(head.state_dict()), math.inf)
    bar = tqdm(range(cfg.max_epochs), desc="fit progress head", disable=not progress_bar, leave=False)
    epoch = 0
    for epoch in bar:
        head.train()
        loss = progress_loss(head(train.states), train.step_traj, train.outcome)
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        with torch.no_grad():
            head.eval()
            valid_mse = float(progress_loss(head(valid.states), valid.step_traj, valid.outcome))
        if valid_mse < best[0] - 1e-7:
            best = (valid_mse, epoch, copy.deepcopy(head.state_dict()), loss.item())
        elif epoch - best[1] >= cfg.patience:
            break
        if epoch % 25 == 0:
            bar.set_postfix(train=f"{loss.item():.4f}", valid=f"{valid_mse:.4f}", best=f"{best[0]:.4f}")
    bar.close()
    head.load_state_dict(best[2])
    head.eval()
    return FitResult(head, best[1], epoch + 1, best[3], best[0], time.perf_counter() - start)


# ----------------------------------------------------------------------------------- the model


@dataclass(eq=False)
class ProgressModel:
    """The frozen encoder, the fitted head, and the record of how they were made."""

    encoder: FrozenEncoder
    head: ProgressHead
    training_data: dict[str, Any] = field(default_factory=dict)
    fit: dict[str, Any] = field(default_factory=dict)
    report: dict[str, Any] = field(default_factory=dict)

    def step_rewards(self, trajs: Sequence[Any], policy_tokenizer: Any = None) -> list[list[float]]:
        """r̂_t of every step of every trajectory: one batched encoder pass over all their steps."""
        seqs = [self.encoder.step_tokens(s, policy_tokenizer) for t in trajs for s in t.steps]
        if not seqs:
            return [[] for _ in trajs]
        with torch.no_grad():
            flat = self.head(self.encoder.states(seqs)).tolist()
        out, start = [], 0
        for t in trajs:
            out.append(flat[start : start + len(t.steps)])
            start += len(t.steps)
        return out

    def trajectory_rewards(self, trajs: Sequence[Any], policy_tokenizer: Any = None) -> list[float]:
        """R̂ = Σ_t r̂_t per trajectory: the dense reward GRPO and GiGPO train on."""
        return [sum(r) for r in self.step_rewards(trajs, policy_tokenizer)]

    def save(self, folder: str | Path) -> Path:
        """Write ``progress_head.safetensors`` and ``progress_model.json`` (the JSON last), each to a
        temporary name first, so a crash never leaves a half-written file where ``load`` looks."""
        from safetensors.torch import save_file

        from rspo_kit.policy.models import tensor_digest

        folder = Path(folder)
        folder.mkdir(parents=True, exist_ok=True)
        tensors = {k: v.detach().cpu().contiguous() for k, v in self.head.state_dict().items()}
        tmp = folder / f".{HEAD_FILE}.{os.getpid()}.tmp"
        save_file(tensors, str(tmp))
        os.replace(tmp, folder / HEAD_FILE)
        meta = {
            "format": FORMAT,
            "architecture": self.head.architecture(),
            "encoder": {
                "id": self.encoder.name,
                "sha256": self.encoder.digest,
                "hidden_size": self.encoder.dim,
                "max_tokens": self.encoder.max_tokens,
                "reads": "policy prompt_ids + action_ids; last layer (after the final norm) at the last token",
            },
            "head_sha256": {k: tensor_digest(v) for k, v in sorted(tensors.items())},
            "training_data": self.training_data,
            "fit": self.fit,
            "report": self.report,
        }
        atomic_write_text(folder / META_FILE, json.dumps(_json_safe(meta), indent=1) + "\n")
        return folder

    @classmethod
    def load(
        cls, folder: str | Path, *, encoder: FrozenEncoder | None = None, device: str = "auto"
    ) -> ProgressModel:
        """The model ``save`` wrote; ``encoder``: an already loaded one to use (checked like any other)."""
        folder = repository_path(folder)
        meta_path, head_path = folder / META_FILE, folder / HEAD_FILE
        for path in (meta_path, head_path):
            if not path.is_file():
                raise RecordError(path, "missing: not a progress model folder (ProgressModel.save writes it)")
        meta = require_keys(
            read_json(meta_path), ("format", "architecture", "encoder", "head_sha256"), meta_path
        )
        if meta["format"] != FORMAT:
            raise RecordError(meta_path, f"format {meta['format']!r}, expected {FORMAT!r}")
        arch = require_keys(meta["architecture"], ("dim", "hidden"), meta_path)
        enc = require_keys(meta["encoder"], ("id", "sha256"), meta_path)
        head = ProgressHead(int(arch["dim"]), int(arch["hidden"]))
        head.load_state_dict(_read_head(head_path, head, meta["head_sha256"]))
        head.eval()
        encoder = encoder or FrozenEncoder.load(enc["id"], device, enc.get("max_tokens"))
        if encoder.digest != enc["sha256"]:
            raise RecordError(
                meta_path,
                f"the head was trained on encoder {enc['id']!r} with weights digest {enc['sha256'][:16]}…, and "
                f"{encoder.name!r} has {encoder.digest[:16]}…: another model, refusing to pair them",
            )
        if encoder.dim != head.dim:
            raise RecordError(
                meta_path,
                f"the head reads {head.dim}-dim states, encoder {encoder.name!r} gives {encoder.dim}",
            )
        return cls(encoder, head, meta.get("training_data", {}), meta.get("fit", {}), meta.get("report", {}))


def _read_head(path: Path, head: ProgressHead, digests: dict[str, str]) -> dict[str, torch.Tensor]:
    """The head's tensors from ``path``, each checked for its name, shape and recorded digest."""
    from safetensors.torch import load_file

    from rspo_kit.policy.models import tensor_digest

    try:
        tensors = load_file(str(path))
    except Exception as err:  # safetensors raises its own error types for a damaged file
        raise RecordError(
            path, f"truncated or damaged safetensors file ({type(err).__name__}: {err})"
        ) from None
    expected = {k: tuple(v.shape) for k, v in head.state_dict().items()}
    if set(tensors) != set(expected):
        raise RecordError(
            path, f"holds tensors {sorted(tensors)}, the head of {META_FILE} has {sorted(expected)}"
        )
    for name, shape in expected.items():
        if tuple(tensors[name].shape) != shape:
            raise RecordError(
                path,
                f"tensor {name} has shape {tuple(tensors[name].shape)}, the architecture in {META_FILE} needs {shape}",
            )
        if tensor_digest(tensors[name]) != digests.get(name):
            raise RecordError(
                path, f"tensor {name} does not match its digest in {META_FILE}: damaged weights"
            )
    return tensors


def _json_safe(x: Any) -> Any:
    """NaN and infinities as null: the JSON stays strict."""
    if isinstance(x, float):
        return x if math.isfinite(x) else None
    if isinstance(x, dict):
        return {k: _json_safe(v) for k, v in x.items()}
    if isinstance(x, list | tuple):
        return [_json_safe(v) for v in x]
    return x


# ------------------------------------------------------------------------------ fitting pipeline


def step_data(
    episodes: Sequence[Episode],
    encoder: FrozenEncoder,
    *,
    env: str,
    outcome_mode: str = "success",
    policy_tokenizer: Any = None,
    progress_bar: bool = False,
) -> StepData:
    """The step table of ``episodes`` with the encoder's state of every step."""
    seqs = [encoder.step_tokens(s, policy_tokenizer) for e in episodes for s in e.traj.steps]
    return StepData.build(episodes, encoder.states(seqs, progress_bar), env=env, outcome_mode=outcome_mode)


def train_progress_model(
    data: StepData,
    encoder: FrozenEncoder,
    cfg: HeadConfig = HeadConfig(),
    *,
    valid_share: float = 0.2,
    test_share: float = 0.2,
    split_seed: int = 0,
    progress_bar: bool = False,
) -> ProgressModel:
    """Split ``data`` by task, fit the head on ``train`` with early stopping on ``valid``, and report
    every split (``progress_data.scorer_report``) beside the env's hand-written ``subgoal`` reward."""
    splits = split_by_task(data, valid_share=valid_share, test_share=test_share, seed=split_seed)
    result = fit_head(splits["train"], splits["valid"], cfg, progress_bar=progress_bar)
    constant = float(splits["train"].outcome.mean())
    with torch.no_grad():
        report = {
            name: scorer_report(result.head(d.states), d, constant=constant) for name, d in splits.items()
        }
    report["subgoal_baseline"] = {
        name: scorer_report(d.subgoal, d, constant=constant) for name, d in splits.items()
    }
    report["held_out_split"] = "test" if "test" in splits else "valid"
    fit = {
        "config": asdict(cfg),
        "valid_share": valid_share,
        "test_share": test_share,
        "split_seed": split_seed,
        "splits": {name: d.summary()["all"] for name, d in splits.items()},
        "best_epoch": result.best_epoch,
        "epochs": result.epochs,
        "train_mse": round(result.train_mse, 6),
        "valid_mse": round(result.valid_mse, 6),
        "seconds": round(result.seconds, 2),
    }
    return ProgressModel(encoder, result.head, {"steps": data.summary()}, fit, report)


# ------------------------------------------------------------------------------ as a process reward


class ProgressReward:
    """A progress model as one env's process reward: ``step_rewards(trajs)``, batched over every step
    of the trajectories not scored yet, remembered per trajectory object (while it lives and keeps
    its number of steps). ``steps_encoded`` counts the steps that went through the encoder."""

    def __init__(self, model: ProgressModel, policy_tokenizer: Any = None) -> None:
        self.model = model
        foreign = policy_tokenizer is not None and not same_vocabulary(
            policy_tokenizer, model.encoder.tokenizer
        )
        self.policy_tokenizer = policy_tokenizer if foreign else None  # None: read the ids as they are
        self.steps_encoded = 0
        self._cache: dict[int, tuple[weakref.ref, int, list[float]]] = {}

    def step_rewards(self, trajs: Sequence[Any]) -> list[list[float]]:
        found = {id(t): self._lookup(t) for t in trajs}
        todo = list({id(t): t for t in trajs if found[id(t)] is None}.values())
        if todo:
            for t, rewards in zip(todo, self.model.step_rewards(todo, self.policy_tokenizer), strict=True):
                found[id(t)] = rewards
                self._remember(t, rewards)
            self.steps_encoded += sum(len(t.steps) for t in todo)
        return [list(found[id(t)]) for t in trajs]

    def _lookup(self, traj: Any) -> list[float] | None:
        entry = self._cache.get(id(traj))
        if entry is None or entry[0]() is not traj or entry[1] != len(traj.steps):
            return None
        return entry[2]

    def _remember(self, traj: Any, rewards: list[float]) -> None:
        key = id(traj)
        try:  # an entry leaves with its trajectory; objects without weak references are not remembered
            ref = weakref.ref(traj, lambda _, key=key: self._cache.pop(key, None))
        except TypeError:
            return
        self._cache[key] = (ref, len(traj.steps), rewards)

    def __getstate__(self) -> dict[str, Any]:
        return {**self.__dict__, "_cache": {}}  # weak references do not pickle; a copy starts afresh


def use_progress_model(
    model: ProgressModel, env: str, policy_tokenizer: Any = None, name: str = PROCESS_NAME
) -> ProgressReward:
    """Make ``model`` the process reward ``name`` of ``env``: ``RewardModel.build(env, process=name)``
    then scores steps with it. Registering again replaces the earlier one."""
    reward = ProgressReward(model, policy_tokenizer)
    register_trajectory_reward(env, name, reward)
    return reward


COMPARISON_COLUMNS = (
    "group_id",
    "traj_id",
    "task_id",
    "step",
    "action",
    "learned",
    "handwritten",
    "learned_return",
    "handwritten_return",
    "outcome",
    "won",
)


def step_comparison(
    scorer: ProgressModel | ProgressReward,
    trajs: Sequence[Any],
    env: str,
    *,
    handwritten: str = "subgoal",
    outcome_mode: str = "success",
) -> pd.DataFrame:
    """One row per step of ``trajs`` (``COMPARISON_COLUMNS``): the progress model's r̂_t (``learned``) beside
    the env's hand-written ``handwritten`` reward of the same step, each with its running sum over the
    trajectory (``*_return``; at the last step, the trajectory's dense return), and its outcome R.
    ``traj_id`` numbers ``trajs`` in order. What notebook 05's ``ProgressModelView`` draws."""
    from rspo_kit.rewards.outcome import outcome_reward
    from rspo_kit.rewards.process import has_process_reward, process_reward

    learned = scorer.step_rewards(trajs)
    hand = process_reward(handwritten, env=env) if has_process_reward(handwritten, env=env) else None
    rows = []
    for i, (t, rewards) in enumerate(zip(trajs, learned, strict=True)):
        outcome = outcome_reward(t.won, t.score, env=env, mode=outcome_mode)
        run_learned = run_hand = 0.0
        for j, (s, r) in enumerate(zip(t.steps, rewards, strict=True)):
            h = (
                float(hand(s.progress_before, s.progress_after, s.action, s.valid, s.info))
                if hand is not None
                else math.nan
            )
            run_learned, run_hand = run_learned + r, run_hand + h
            rows.append(
                (t.group_id, i, t.task_id, j, s.action, r, h, run_learned, run_hand, outcome, bool(t.won))
            )
    return pd.DataFrame(rows, columns=list(COMPARISON_COLUMNS))


def committed_progress_model(env: str) -> Path | None:
    """``data/progress_models/<env>/`` where it holds a saved model, else None."""
    folder = data_dir() / "progress_models" / env
    return folder if (folder / META_FILE).is_file() else None


def auto_process_reward(env: str, swap_mode: str, misalign_eps: float = 0.0) -> str:
    """The dense reward a run gets when ``reward.process`` is ``"auto"``: under the paper's loop
    (``swap.mode = "rspo"``) its own dense reward, the progress model, wherever weights for ``env`` are
    committed; otherwise, and wherever a misalignment knob is set (it mixes a hack into a hand-written
    reward, the teaching case for hacking), the env's hand-written ``subgoal`` reward.

    >>> auto_process_reward("alfworld", "off"), auto_process_reward("my-env", "rspo")
    ('subgoal', 'subgoal')
    """
    if swap_mode == "rspo" and not misalign_eps and committed_progress_model(env) is not None:
        return PROCESS_NAME
    return "subgoal"


def progress_model_folder(env: str, folder: str | Path | None) -> Path:
    """The weights a run with ``reward.process = "progress_model"`` loads: ``folder`` (relative to the
    repository or absolute), else the env's committed ones; an error naming the field where neither is."""
    if folder is not None:
        path = repository_path(folder)
        if not (path / META_FILE).is_file():
            raise FileNotFoundError(
                f"reward.progress_model = {str(folder)!r}: {path / META_FILE} is missing (write one with "
                f"python -m rspo_kit.rewards.progress_model train --env {env} --out {folder})"
            )
        return path
    committed = committed_progress_model(env)
    if committed is None:
        raise FileNotFoundError(
            f"reward.process = {PROCESS_NAME!r} and reward.progress_model is None, and {env!r} has no committed "
            f"weights under {data_dir() / 'progress_models' / env}: train one with python -m "
            f"rspo_kit.rewards.progress_model train --env {env} --out <folder>, then set reward.progress_model"
        )
    return committed


def use_run_progress_model(env: str, folder: str | Path | None, policy: Any) -> ProgressReward:
    """Load a run's progress model (``progress_model_folder``) on the policy's device and register it as
    ``env``'s process reward ``"progress_model"``, reading the steps written by ``policy``'s tokenizer."""
    device = "cpu" if policy.device.device.type == "cpu" else "auto"
    model = ProgressModel.load(progress_model_folder(env, folder), device=device)
    return use_progress_model(model, env, policy_tokenizer=policy.tokenizer)


# ------------------------------------------------------------------------------------------- CLI


def _cached_step_data(
    spec: CollectSpec, policy: Any, encoder: FrozenEncoder, use_cache: bool
) -> tuple[StepData, dict]:
    """The step table of ``spec``'s episodes read by ``encoder``: from the cache when this collection
    and encoder were seen before, else collected, encoded and cached (``cache_dir()/progress_model``)."""
    from rspo_kit.policy.models import weights_digest

    translate = None if same_vocabulary(policy.tokenizer, encoder.tokenizer) else policy.tokenizer
    record = {
        "version": DATA_VERSION,
        "spec": asdict(spec),
        "policy_sha256": weights_digest(policy.model),
        "encoder_sha256": encoder.digest,
        "max_tokens": encoder.max_tokens,
        "translated": translate is not None,
    }
    key = hashlib.sha256(json.dumps(record, sort_keys=True).encode()).hexdigest()[:16]
    folder = cache_dir() / "progress_model" / f"{spec.env}-{key}"
    if use_cache and (folder / "collection.json").is_file():
        return StepData.load(folder), json.loads((folder / "collection.json").read_text())
    start = time.perf_counter()
    episodes = collect_episodes(spec, policy)
    collect_s = time.perf_counter() - start
    data = step_data(
        episodes,
        encoder,
        env=spec.env,
        outcome_mode=spec.outcome_mode,
        policy_tokenizer=translate,
        progress_bar=True,
    )
    noisy_p = [e.expert_p for e in episodes if e.expert_p is not None]
    collection = record | {
        "sources": {
            "warm_start": f"{spec.n_tasks} train tasks x {spec.group_size} episodes sampled from {spec.policy} "
            "(choice mode, temperature 1)",
            "noisy_expert": f"{spec.n_noisy} episodes: the env's expert action with probability p ~ "
            f"U{tuple(spec.behaviour_p)} per episode, else a random admissible action, on the same tasks",
        },
        "noisy_expert_mean_p": round(sum(noisy_p) / len(noisy_p), 4) if noisy_p else None,
        "seconds": {
            "collect": round(collect_s, 1),
            "encode": round(time.perf_counter() - start - collect_s, 1),
        },
    }
    data.save(folder)
    atomic_write_text(folder / "collection.json", json.dumps(collection, indent=1))
    return data, collection


def _train(args: argparse.Namespace) -> ProgressModel:
    from rspo_kit.policy.rollout import Policy

    torch.set_num_threads(args.threads)
    default_policy, default_cap = WARM_STARTS.get(args.env, (None, None))
    policy_name = args.policy or default_policy
    if policy_name is None:
        raise SystemExit(
            f"--env {args.env} has no committed warm start ({sorted(WARM_STARTS)}); name one with --policy"
        )
    source = repository_path(policy_name)
    policy = Policy.load(str(source) if source.is_dir() else policy_name, device=args.device, seed=args.seed)
    encoder = FrozenEncoder.load(args.encoder or policy_name, args.device)
    spec = CollectSpec(
        args.env,
        policy_name,
        args.episodes,
        args.noisy_expert_share,
        args.group_size,
        args.max_steps if args.max_steps is not None else default_cap,
        args.outcome_mode or OUTCOME_MODE.get(args.env, "success"),
        args.seed,
    )
    data, collection = _cached_step_data(spec, policy, encoder, not args.no_cache)
    cfg = HeadConfig(args.hidden, args.lr, args.weight_decay, args.max_epochs, args.patience, args.seed)
    model = train_progress_model(
        data,
        encoder,
        cfg,
        valid_share=args.valid_share,
        test_share=args.test_share,
        split_seed=args.seed,
        progress_bar=True,
    )
    model.training_data = {
        "env": args.env,
        "command": "python -m rspo_kit.rewards.progress_model " + " ".join(args.argv),
        "collection": collection,
    } | model.training_data
    model.save(args.out)
    print(format_report(model.report, model.training_data, model.fit))
    print(f"saved to {args.out}")
    return model


def format_report(report: dict, training_data: dict, fit: dict) -> str:
    """A few lines a person reads: the data, the fit, and the held-out numbers beside the baseline."""
    held = report.get("held_out_split", "test")
    steps = training_data.get("steps", {})
    lines = [f"progress model for {training_data.get('env', '?')}: {steps.get('all', {})}"]
    lines += [f"  source {s}: {v}" for s, v in steps.get("by_source", {}).items()]
    lines.append(
        f"fit: best epoch {fit.get('best_epoch')} of {fit.get('epochs')}, train MSE {fit.get('train_mse')}, "
        f"valid MSE {fit.get('valid_mse')}, {fit.get('seconds')} s"
    )
    keys = ("mse", "mse_constant", "pearson", "auc_success", "kendall_tau", "tau_groups")
    for name, part in (
        ("progress model", report.get(held, {})),
        ("subgoal reward", report.get("subgoal_baseline", {}).get(held, {})),
    ):
        values = ", ".join(f"{k} {part.get(k)}" for k in keys)
        dis = part.get("disagreement", {})
        lines.append(
            f"{held} ({part.get('trajectories')} trajectories), {name}: {values}, step disagreement {dis.get('rate')}"
        )
    return "\n".join(lines)


def _report(args: argparse.Namespace) -> None:
    path = Path(args.folder) / META_FILE
    meta = read_json(path)
    if args.json:
        print(json.dumps({k: meta.get(k) for k in ("training_data", "fit", "report")}, indent=1))
    else:
        print(format_report(meta.get("report", {}), meta.get("training_data", {}), meta.get("fit", {})))


def main(argv: Sequence[str] | None = None) -> None:
    parser = argparse.ArgumentParser(
        prog="python -m rspo_kit.rewards.progress_model", description=__doc__.split("\n\n")[0]
    )
    commands = parser.add_subparsers(dest="command", required=True)
    train = commands.add_parser(
        "train", help="collect episodes, cache the encoder's states, fit and save the head"
    )
    train.add_argument("--env", required=True)
    train.add_argument("--out", required=True, type=Path)
    train.add_argument(
        "--encoder", default=None, help="policy preset, folder or HF path (default: the policy)"
    )
    train.add_argument(
        "--policy",
        default=None,
        help="who plays the warm-start episodes (default: the env's committed warm start)",
    )
    train.add_argument("--episodes", type=int, default=384)
    train.add_argument("--noisy-expert-share", type=float, default=0.0)
    train.add_argument("--group-size", type=int, default=8)
    train.add_argument(
        "--max-steps", type=int, default=None, help="episode cap (default: the warm start's protocol's)"
    )
    train.add_argument("--outcome-mode", choices=("success", "score"), default=None)
    train.add_argument("--seed", type=int, default=0)
    train.add_argument("--hidden", type=int, default=HeadConfig.hidden)
    train.add_argument("--lr", type=float, default=HeadConfig.lr)
    train.add_argument("--weight-decay", type=float, default=HeadConfig.weight_decay)
    train.add_argument("--max-epochs", type=int, default=HeadConfig.max_epochs)
    train.add_argument("--patience", type=int, default=HeadConfig.patience)
    train.add_argument("--valid-share", type=float, default=0.2)
    train.add_argument("--test-share", type=float, default=0.2)
    train.add_argument("--threads", type=int, default=1)
    train.add_argument("--device", default="cpu", choices=("auto", "cpu", "cuda"))
    train.add_argument("--no-cache", action="store_true", help="collect and encode again even if cached")
    report = commands.add_parser("report", help="print the fit report of a saved progress model")
    report.add_argument("folder")
    report.add_argument("--json", action="store_true")
    # the top-level help shows every command's options, so that one --help says how to call any of them
    parser.epilog = "\n".join(sub.format_usage().strip() for sub in (train, report))
    parser.formatter_class = argparse.RawDescriptionHelpFormatter
    args = parser.parse_args(argv)
    args.argv = list(sys.argv[1:] if argv is None else argv)  # recorded with the weights it writes
    {"train": _train, "report": _report}[args.command](args)


if __name__ == "__main__":
    main()

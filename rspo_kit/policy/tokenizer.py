"""A small byte-level BPE tokenizer trained locally on the environments' own text.

Tiny models cannot afford a 150k-token vocabulary; a ~2,000-token BPE trained on the instructions,
observations and admissible actions of our environments turns ``go to countertop 1`` into a handful
of tokens. Training is deterministic in its corpus, and the result is cached by the corpus hash, so
the same inputs always give the same tokenizer.
"""

from __future__ import annotations

import hashlib
import os
from collections.abc import Iterable
from pathlib import Path

from tokenizers import Tokenizer, decoders, models, pre_tokenizers, processors, trainers
from transformers import PreTrainedTokenizerFast

PAD, BOS, EOS = "<|pad|>", "<|bos|>", "<|eos|>"
IM_START, IM_END = "<|im_start|>", "<|im_end|>"
SPECIAL_TOKENS = [PAD, BOS, EOS, IM_START, IM_END]

# ChatML, the format of Qwen2 and SmolLM2 instruct models, so prompts read the same for every preset.
CHAT_TEMPLATE = (
    "{% for message in messages %}"
    "{{ '<|im_start|>' + message['role'] + '\\n' + message['content'] + '<|im_end|>' + '\\n' }}"
    "{% endfor %}"
    "{% if add_generation_prompt %}{{ '<|im_start|>assistant\\n' }}{% endif %}"
)


def corpus_hash(texts: Iterable[str], vocab_size: int) -> str:
    h = hashlib.sha256(str(vocab_size).encode())
    for text in texts:
        h.update(text.encode("utf-8", "replace"))
        h.update(b"\x00")
    return h.hexdigest()[:16]


def train_tokenizer(texts: list[str], vocab_size: int = 2048) -> PreTrainedTokenizerFast:
    """Train a byte-level BPE on ``texts`` and wrap it for transformers (pad/bos/eos, chat template)."""
    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    tok.post_processor = processors.ByteLevel(trim_offsets=False)
    trainer = trainers.BpeTrainer(
        vocab_size=vocab_size,
        special_tokens=SPECIAL_TOKENS,
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
        min_frequency=2,
        show_progress=False,
    )
    tok.train_from_iterator(texts, trainer=trainer)
    return wrap(tok)


def wrap(tok: Tokenizer) -> PreTrainedTokenizerFast:
    fast = PreTrainedTokenizerFast(tokenizer_object=tok, bos_token=BOS, eos_token=EOS, pad_token=PAD)
    fast.chat_template = CHAT_TEMPLATE
    fast.padding_side = "left"  # generation batches are left-padded
    return fast


def load_or_train(texts: list[str], cache: Path, vocab_size: int = 2048) -> PreTrainedTokenizerFast:
    """The tokenizer for this corpus, from ``cache/<hash>/`` or trained and saved there."""
    folder = cache / f"bpe{vocab_size}-{corpus_hash(texts, vocab_size)}"
    if (folder / "tokenizer.json").is_file():
        return wrap(Tokenizer.from_file(str(folder / "tokenizer.json")))
    fast = train_tokenizer(texts, vocab_size)
    folder.mkdir(parents=True, exist_ok=True)
    tmp = folder / f".tokenizer.json.{os.getpid()}.tmp"  # per process: another may build the same one
    fast.backend_tokenizer.save(str(tmp))
    tmp.replace(folder / "tokenizer.json")
    return fast

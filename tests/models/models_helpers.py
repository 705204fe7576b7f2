"""Helpers of the model-adapter tests (tiny tokenizers and configs, skips without importing)."""

from __future__ import annotations

import gzip
import importlib.util
import json
from pathlib import Path
from typing import Any

import pytest

#: BPE merges kept in the tiny tokenizer (its vocabulary: 512 byte symbols + merges + 2 specials).
N_MERGES = 500


def bpe_path() -> Path:
    """open_clip's bundled BPE file, found without importing open_clip (which imports torchvision)."""
    spec = importlib.util.find_spec("open_clip")
    if spec is None or not spec.submodule_search_locations:
        pytest.skip("open_clip_torch is not installed", allow_module_level=True)
    return Path(next(iter(spec.submodule_search_locations))) / "bpe_simple_vocab_16e6.txt.gz"


def bytes_to_unicode() -> dict[int, str]:
    """The byte → symbol table of CLIP's BPE (as in open_clip.tokenizer and GPT-2)."""
    bs = [*range(ord("!"), ord("~") + 1), *range(ord("¡"), ord("¬") + 1), *range(ord("®"), ord("ÿ") + 1)]
    cs = bs[:]
    n = 0
    for b in range(256):
        if b not in bs:
            bs.append(b)
            cs.append(256 + n)
            n += 1
    return dict(zip(bs, [chr(c) for c in cs], strict=True))


def write_clip_vocab(out: Path, n_merges: int = N_MERGES) -> tuple[Path, Path, int]:
    """Write ``vocab.json`` and ``merges.txt`` of a CLIP BPE tokenizer; returns (vocab, merges, size)."""
    with gzip.open(bpe_path(), "rt", encoding="utf-8") as f:
        lines = f.read().split("\n")
    merges = [tuple(line.split()) for line in lines[1 : 1 + n_merges]]
    symbols = list(bytes_to_unicode().values())
    vocab = [*symbols, *(s + "</w>" for s in symbols), *("".join(m) for m in merges)]
    vocab += ["<|startoftext|>", "<|endoftext|>"]
    vocab_file, merges_file = out / "vocab.json", out / "merges.txt"
    vocab_file.write_text(json.dumps({tok: i for i, tok in enumerate(vocab)}), encoding="utf-8")
    merges_file.write_text(
        "#version: 0.2\n" + "\n".join(" ".join(m) for m in merges) + "\n", encoding="utf-8"
    )
    return vocab_file, merges_file, len(vocab)


def require(package: str) -> None:
    """Skip unless ``package`` is installed, without importing it.

    ``pytest.importorskip("open_clip")`` would import torchvision before ``ensure_torchvision``.
    """
    if importlib.util.find_spec(package) is None:
        pytest.skip(f"{package} is not installed", allow_module_level=True)


def tiny_tower(**extra: Any) -> dict[str, Any]:
    return dict(hidden_size=32, intermediate_size=37, num_hidden_layers=2, num_attention_heads=2, **extra)

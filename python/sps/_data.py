"""Token files: sps.prepare (as `sps data prepare`) and read-only arrays over them."""
from __future__ import annotations

import os
from typing import Optional, Sequence, Union

import numpy as np

from . import _progress, _sps

PathLike = Union[str, os.PathLike]


def prepare(inputs: Union[PathLike, Sequence[PathLike]], out: PathLike, *,
            tokenizer: PathLike = "gpt2", include: Sequence[str] = (), format: str = "auto",
            field: str = "text", split_blank_lines: bool = False, val_fraction: float = 0.0005,
            seed: int = 42, shuffle: bool = True, shuffle_seed: int = 2357, dtype: str = "uint16",
            threads: int = 0, overwrite: bool = False, skip_bad_records: bool = False,
            progress: bool = True) -> dict:
    """Text files, folders and JSON Lines (plain, .gz, .zst) -> out/train.bin, val.bin and
    meta.json, exactly as `sps data prepare` (docs/data.md). Returns the counts it reports.
    Ctrl-C stops it with nothing new left behind."""
    if isinstance(inputs, (str, os.PathLike)):
        inputs = [inputs]
    return _sps.prepare([os.fspath(p) for p in inputs], os.fspath(out), os.fspath(tokenizer),
                        list(include), format, field, split_blank_lines, val_fraction, seed,
                        shuffle, shuffle_seed, dtype, threads, overwrite, skip_bad_records,
                        _progress.bar(progress, "prepare", "B"))


def open_tokens(path: PathLike, dtype: Optional[str] = None,
                vocab_size: Optional[int] = None) -> np.ndarray:
    """A token file (train.bin, val.bin) as a read-only 1-D array over its memory map (no
    copy; the map stays open while any view of it lives). dtype: "uint16" or "uint32"
    (default: meta.json's, else uint16). Ids are checked below vocab_size, else below the
    vocab_size meta.json records."""
    return _sps.open_tokens(os.fspath(path), dtype, vocab_size)


def validation_windows(file_tokens: int, block_size: int, eval_total_tokens: int,
                       seed: int = 42) -> np.ndarray:
    """Start positions of the trainer's validation windows of block_size + 1 tokens
    (docs/model.md §6.5): what `sps eval`'s val task scores."""
    return _sps.validation_windows(file_tokens, block_size, eval_total_tokens, seed)

"""Token files: sps.prepare (as `sps data prepare`) and read-only arrays over them."""
from __future__ import annotations

import os
from typing import Optional, Sequence, Union

import numpy as np

from . import _args, _progress, _sps

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
    return _sps.prepare(_args.paths("inputs", inputs), _args.path("out", out),
                        _args.path("tokenizer", tokenizer), _args.texts("include", include),
                        _args.text("format", format), _args.text("field", field),
                        _args.flag("split_blank_lines", split_blank_lines),
                        _args.number("val_fraction", val_fraction), _args.seed("seed", seed),
                        _args.flag("shuffle", shuffle), _args.seed("shuffle_seed", shuffle_seed),
                        _args.text("dtype", dtype), _args.integer("threads", threads, _args.INT32),
                        _args.flag("overwrite", overwrite),
                        _args.flag("skip_bad_records", skip_bad_records),
                        _progress.bar(_args.flag("progress", progress), "prepare", "B"))


def open_tokens(path: PathLike, dtype: Optional[str] = None,
                vocab_size: Optional[int] = None) -> np.ndarray:
    """A token file (train.bin, val.bin) as a read-only 1-D array over its memory map (no
    copy; the map stays open while any view of it lives). dtype: "uint16" or "uint32"
    (default: meta.json's, else uint16). Ids are checked below vocab_size, else below the
    vocab_size meta.json records."""
    return _sps.open_tokens(_args.path("path", path), _args.optional_text("dtype", dtype),
                            _args.optional_integer("vocab_size", vocab_size))


def validation_windows(file_tokens: int, block_size: int, eval_total_tokens: int,
                       seed: int = 42) -> np.ndarray:
    """Start positions of the trainer's validation windows of block_size + 1 tokens
    (docs/model.md §6.5): what `sps eval`'s val task scores."""
    return _sps.validation_windows(_args.integer("file_tokens", file_tokens),
                                   _args.integer("block_size", block_size),
                                   _args.integer("eval_total_tokens", eval_total_tokens),
                                   _args.seed("seed", seed))

"""sps.train and sps.evaluate: the trainer and the evaluation of the commands, in process."""
from __future__ import annotations

import os
from typing import Any, Callable, Mapping, Optional, Sequence, Union

from . import _args, _progress, _sps
from ._model import load

PathLike = Union[str, os.PathLike]


def _override_text(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    return str(value)


def train(config: PathLike, overrides: Optional[Mapping[str, Any]] = None, *,
          on_log: Optional[Callable[[dict], Any]] = None, resume: bool = False,
          stop_after: Optional[int] = None, device: Optional[str] = None,
          progress: bool = True) -> dict:
    """Runs `sps train --config CONFIG key=value ...` in this process: the same trainer, run
    folder (system.out_dir), lock, checkpoints, metrics.jsonl and resume.

    overrides: {"training.max_tokens": 1_000_000, ...}. on_log(record) gets each metrics
    record as a dict as it is written; returning False stops the run at the next step
    boundary with checkpoints/latest, as stop_after (steps) does. Ctrl-C (SIGINT) does the
    same, then raises KeyboardInterrupt; a second one ends the process. Returns the summary:
    out_dir, step, tokens, finished, interrupted, val_nll, tokens_per_second."""
    items = [f"{_args.text('overrides', key)}={_override_text(value)}"
             for key, value in _args.mapping("overrides", overrides or {}).items()]
    return _sps.train(_args.path("config", config), items, _args.text("device", device or ""),
                      _args.flag("resume", resume),
                      _args.optional_integer("stop_after", stop_after) or 0,
                      _args.callable_or_none("on_log", on_log),
                      _progress.bar(_args.flag("progress", progress), "train", "tokens"))


def evaluate(checkpoint: PathLike, tasks: Union[str, Sequence[str], None] = None, *,
             device: str = "cpu", tokenizer: Optional[PathLike] = None, **options: Any) -> dict:
    """sps.load(checkpoint) then Model.evaluate(tasks, **options): `sps eval --checkpoint`'s
    results as a dict."""
    return load(_args.path("checkpoint", checkpoint), device=device,
                tokenizer=tokenizer).evaluate(tasks, **options)

"""Generation results and the streaming iterator of Model.generate / Model.stream."""
from __future__ import annotations

from dataclasses import dataclass
from typing import Iterator, List, Optional, Tuple

import numpy as np


@dataclass(frozen=True)
class TokenLogprob:
    """A generated token's log-probability under the model (softmax of its logits at
    temperature 1), and its most likely alternatives as (id, logprob), most likely first."""

    id: int
    logprob: float
    top: List[Tuple[int, float]]


@dataclass(frozen=True)
class Generation:
    """One prompt's generation: its text (cut before a stop string, without a stopping EOS),
    the generated ids (a stopping EOS included), the ids the prompt was fed as, why it
    stopped ("eos", "stop" or "length"), whether the prompt lost tokens on the left, and
    the tokens' logprobs when asked for."""

    text: str
    tokens: np.ndarray
    prompt_tokens: np.ndarray
    stop_reason: str
    truncated: bool
    logprobs: Optional[List[TokenLogprob]] = None


@dataclass(frozen=True)
class TokenEvent:
    """A token as the stream yields it: the prompt's row, the id, the text that became
    final with it (often empty while a stop string may still begin, or inside a
    character), whether the row stopped with it, and its logprob when asked for."""

    row: int
    id: int
    text: str
    last: bool
    logprob: Optional[TokenLogprob] = None


def _logprob(value) -> Optional[TokenLogprob]:
    if value is None:
        return None
    token, logprob, top = value
    return TokenLogprob(token, logprob, [tuple(t) for t in top])


def _generation(d: dict) -> Generation:
    lps = d.get("logprobs")
    return Generation(
        text=d["text"].decode("utf-8", errors="replace"),
        tokens=d["tokens"],
        prompt_tokens=d["prompt_tokens"],
        stop_reason=d["stop_reason"],
        truncated=d["truncated"],
        logprobs=None if lps is None else [_logprob(lp) for lp in lps],
    )


class GenerationStream:
    """Iterates over the tokens of a batch as the decoder chooses them (TokenEvent, in row
    order within each step). The first step prefills. Breaking out of the loop ends the
    generation; results() and stats hold what was generated so far."""

    def __init__(self, engine_stream) -> None:
        self._s = engine_stream
        self._pending: List[TokenEvent] = []

    def __iter__(self) -> Iterator[TokenEvent]:
        return self

    def __next__(self) -> TokenEvent:
        while not self._pending:
            step = self._s.step()
            if step is None:
                raise StopIteration
            for row, token, text, last, logprob in step:
                # A row's text pieces end on whole characters except where it stops.
                self._pending.append(
                    TokenEvent(row, token, text.decode("utf-8", errors="replace"), last,
                               _logprob(logprob)))
        return self._pending.pop(0)

    def finish(self) -> List[Generation]:
        """Generates to the end (without yielding the tokens) and returns every row's result."""
        return [_generation(d) for d in self._s.finish()]

    def results(self) -> List[Generation]:
        """Every row's generation so far (complete once the iteration is over)."""
        return [_generation(d) for d in self._s.results()]

    @property
    def stats(self) -> dict:
        """Prompt and generated token counts, prefill seconds, decode tokens/s, KV cache bytes."""
        return self._s.stats()

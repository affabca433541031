"""sps.Tokenizer: byte-level BPE (GPT-2's files or a tiktoken rank file), ids as numpy uint32."""
from __future__ import annotations

import os
from typing import List, Sequence, Union

import numpy as np

from . import _args, _sps

Text = Union[str, bytes]


class Tokenizer:
    """A tokenizer: "gpt2" (GPT-2's files, `make deps`), a folder with encoder.json and
    vocab.bpe, or a rank file (`sps tokenizer train`). The same ids and bytes as
    `sps tokenizer encode|decode`."""

    def __init__(self, spec: Union[str, os.PathLike] = "gpt2") -> None:
        self._t = _sps.Tokenizer(_args.path("spec", spec))

    @classmethod
    def _wrap(cls, engine_tokenizer) -> "Tokenizer":
        t = cls.__new__(cls)
        t._t = engine_tokenizer
        return t

    name = property(lambda self: self._t.name, doc='"gpt2" or the path loaded')
    vocab_size = property(lambda self: self._t.vocab_size, doc="ids in use, EOS included")
    eos_id = property(lambda self: self._t.eos_id)
    predict_id = property(lambda self: self._t.predict_id, doc="the first id after the vocabulary")
    pad_id = property(lambda self: self._t.pad_id, doc="padded_vocab_size - 1")
    padded_vocab_size = property(lambda self: self._t.padded_vocab_size, doc="V, a multiple of 64")

    def encode(self, text: Union[Text, Sequence[Text]]) -> Union[np.ndarray, List[np.ndarray]]:
        """Ids of a text (uint32 array), or of each text of a list (a list of arrays, encoded
        in parallel). A str is encoded as UTF-8; bytes as they are (ill-formed UTF-8 becomes
        U+FFFD first, as the command does)."""
        if isinstance(text, (str, bytes)) or not isinstance(text, Sequence):
            return self._t.encode_one(text)  # (refusing anything but str and bytes)
        return self._t.encode_many(list(text))

    def decode_bytes(self, ids) -> bytes:
        """The bytes of the ids (what `sps tokenizer decode` prints); EOS is b"<|endoftext|>"."""
        return self._t.decode_bytes(ids)

    def decode(self, ids) -> str:
        """The text of the ids; bytes that split a character become U+FFFD."""
        return self.decode_bytes(ids).decode("utf-8", errors="replace")

    def __repr__(self) -> str:
        return f"sps.Tokenizer({self.name!r}, vocab_size={self.vocab_size})"

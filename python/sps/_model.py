"""sps.Model: a model loaded for inference, on numpy arrays."""
from __future__ import annotations

import json
import math
import os
from typing import Any, Dict, Iterable, List, Mapping, Optional, Sequence, Tuple, Union

import numpy as np

from . import _args, _progress, _sps
from ._generation import Generation, GenerationStream
from ._tokenizer import Tokenizer

TextOrIds = Union[str, bytes, Sequence[int], np.ndarray]
PathLike = Union[str, os.PathLike]

_COMPILE_PREFIX = "_orig_mod."  # torch.compile's prefix on a state dict's names
_TIED_HEAD = "lm_head.weight"
_EMBEDDING = "transformer.wte.weight"


class Model:
    """A model for inference (its projection weights packed as `sps generate` packs them).
    Made by sps.load, sps.from_state_dict or sps.from_torch_checkpoint. Calls on one model
    from several threads take turns; two models run side by side."""

    def __init__(self, engine_model, tokenizer_spec: Optional[str]) -> None:
        self._m = engine_model
        self._tokenizer_spec = tokenizer_spec
        self.last_generation_stats: Optional[dict] = None

    # ---- what it is -----------------------------------------------------------------
    @property
    def config(self) -> Dict[str, Any]:
        """The model section: family, n_layer, n_head, hidden_size, ..., window_size, ids."""
        return self._m.config

    @property
    def device(self) -> str:
        return self._m.device

    @property
    def weights_path(self) -> str:
        """The weights file (or what the weights came from: "state_dict", a .pt path)."""
        return self._m.weights_path

    @property
    def tokenizer(self) -> Tokenizer:
        """The tokenizer given to load, else the one the config names (loaded on first use)."""
        return Tokenizer._wrap(self._m.tokenizer)

    def __repr__(self) -> str:
        c = self.config
        window = f", w={c['window_size']}" if c["family"] != "standard" else ""
        return (f"sps.Model({c['family']}{window}, L={c['n_layer']}, d={c['hidden_size']}, "
                f"V={c['vocab_size']}, T={c['block_size']}, {self.weights_path!r})")

    # ---- forward --------------------------------------------------------------------
    def logits(self, tokens) -> np.ndarray:
        """Logits [B, T, V] (float32) of token ids [B, T] (any integer dtype; 1-D for one
        sequence gives [T, V]), T <= block_size, rows left-padded with PAD where shorter.
        The array owns the buffer the engine wrote (no copy)."""
        return self._m.logits(tokens)

    def nll(self, tokens) -> np.ndarray:
        """Per-token NLL [B, N-1] (float64) of rows of N tokens: term i predicts tokens[:, i+1]
        from tokens[:, :i+1] (docs/model.md §5). Terms the loss leaves out (input EOS or PAD)
        are NaN, so np.nanmean over windows is the validation NLL of `sps eval`."""
        return self._m.nll(tokens)

    # ---- lm-evaluation-harness's requests ------------------------------------------
    def loglikelihood(self, context: Union[TextOrIds, Sequence[Tuple[TextOrIds, TextOrIds]]],
                      continuation: Optional[TextOrIds] = None, *, batch: int = 8,
                      scoring: str = "shared", progress: bool = False
                      ) -> Union[Tuple[float, bool], List[Tuple[float, bool]]]:
        """(log p(continuation | context), is greedy) in nats, as `sps eval` scores a zero-shot
        choice (context and continuation tokenized apart; an empty context reads EOS; the
        sequence cut to its last block_size + 1 tokens). Give one context and continuation,
        or a list of (context, continuation) pairs for a list of results."""
        batch, scoring = _args.integer("batch", batch), _args.text("scoring", scoring)
        progress = _args.flag("progress", progress)
        if continuation is None:
            pairs = _args.sequence("context", context, "a list of (context, continuation) pairs")
            return self._m.loglikelihood(pairs, batch, scoring,
                                         _progress.bar(progress, "loglikelihood", "requests"))
        return self._m.loglikelihood([(context, continuation)], batch, scoring, None)[0]

    def loglikelihood_rolling(self, text: Union[TextOrIds, Sequence[TextOrIds]], *,
                              batch: int = 8, progress: bool = False
                              ) -> Union[float, List[float]]:
        """The log-likelihood of a whole document (nats), scored in non-overlapping windows of
        block_size tokens as `sps eval`'s corpus task does (docs/model.md §8). A list gives a
        list."""
        batch, progress = _args.integer("batch", batch), _args.flag("progress", progress)
        if isinstance(text, (str, bytes, np.ndarray)) or (
                isinstance(text, Sequence) and text and isinstance(text[0], (int, np.integer))):
            return self._m.loglikelihood_rolling([text], batch, None)[0]
        texts = _args.sequence("text", text, "a text (str, bytes or token ids) or a list of them")
        return self._m.loglikelihood_rolling(texts, batch,
                                             _progress.bar(progress, "loglikelihood_rolling", "windows"))

    # ---- generation -----------------------------------------------------------------
    def stream(self, prompts: Union[TextOrIds, Sequence[TextOrIds]], max_new_tokens: int = 128,
               *, temperature: float = 0.0, top_k: int = 0, top_p: float = 1.0, seed: int = 0,
               stop: Iterable[str] = (), forbid: Iterable[int] = (), ignore_eos: bool = False,
               truncate: str = "none", logprobs: Optional[int] = None,
               prefill_rows: int = 0) -> GenerationStream:
        """The tokens of generate() one by one as they are chosen (TokenEvent)."""
        if isinstance(prompts, (str, bytes, np.ndarray)) or (
                isinstance(prompts, Sequence) and prompts and isinstance(prompts[0], (int, np.integer))):
            prompts = [prompts]
        prompts = _args.sequence("prompts", prompts,
                                 "a prompt (str, bytes or token ids) or a list of them")
        logprobs = _args.optional_integer("logprobs", logprobs)
        return GenerationStream(_sps.GenerationStream(
            self._m, prompts, _args.integer("max_new_tokens", max_new_tokens),
            _args.number("temperature", temperature), _args.integer("top_k", top_k),
            _args.number("top_p", top_p), _args.seed("seed", seed), _args.texts("stop", stop),
            _args.integers("forbid", forbid, _args.INT32), _args.flag("ignore_eos", ignore_eos),
            _args.text("truncate", truncate), -1 if logprobs is None else logprobs,
            _args.integer("prefill_rows", prefill_rows)))

    def generate(self, prompts: Union[TextOrIds, Sequence[TextOrIds]], max_new_tokens: int = 128,
                 *, temperature: float = 0.0, top_k: int = 0, top_p: float = 1.0, seed: int = 0,
                 stop: Iterable[str] = (), forbid: Iterable[int] = (), ignore_eos: bool = False,
                 truncate: str = "none", logprobs: Optional[int] = None,
                 prefill_rows: int = 0) -> Union[Generation, List[Generation]]:
        """Continues each prompt (text, or token ids) on the KV cache, the prompts as one
        left-padded batch: greedy unless temperature > 0 (then top_k, top_p), row i drawing
        from stream i of `seed`. Stops at EOS (unless ignore_eos), a stop string, or
        max_new_tokens. The same tokens as `sps generate` with the same flags. One prompt
        gives a Generation, a list a list. logprobs=k also reports each token's logprob and
        its k most likely alternatives."""
        single = isinstance(prompts, (str, bytes, np.ndarray)) or (
            isinstance(prompts, Sequence) and prompts and isinstance(prompts[0], (int, np.integer)))
        s = self.stream(prompts, max_new_tokens, temperature=temperature, top_k=top_k, top_p=top_p,
                        seed=seed, stop=stop, forbid=forbid, ignore_eos=ignore_eos,
                        truncate=truncate, logprobs=logprobs, prefill_rows=prefill_rows)
        results = s.finish()
        self.last_generation_stats = s.stats
        return results[0] if single else results

    # ---- evaluation -----------------------------------------------------------------
    def evaluate(self, tasks: Union[str, Sequence[str], None] = None, *,
                 task_files: Optional[Mapping[str, PathLike]] = None, suite: Optional[str] = None,
                 batch: int = 8, limit: int = 0, val_tokens: Optional[int] = None,
                 corpus_bytes: int = 0, scoring: str = "shared", progress: bool = True) -> dict:
        """What `sps eval` writes to --out, as a dict: tasks "val", "val:PATH",
        "corpus:NAME=PATH", and the zero-shot tasks with their files in task_files
        (docs/evaluation.md)."""
        if isinstance(tasks, str):
            tasks = [t.strip() for t in tasks.split(",") if t.strip()]
        files = {_args.text("task_files", name): _args.path(f"task_files[{name!r}]", path)
                 for name, path in _args.mapping("task_files", task_files or {}).items()}
        val_tokens = _args.optional_integer("val_tokens", val_tokens)
        return self._m.evaluate(_args.texts("tasks", tasks or []), files,
                                _args.text("suite", suite or ""), _args.integer("batch", batch),
                                _args.integer("limit", limit),
                                -1 if val_tokens is None else val_tokens,
                                _args.integer("corpus_bytes", corpus_bytes),
                                _args.text("scoring", scoring),
                                _progress.bars(_args.flag("progress", progress)))

    # ---- weights --------------------------------------------------------------------
    def state_dict(self) -> Dict[str, np.ndarray]:
        """The weights under the reference code's parameter names (docs/model.md §2), float32,
        read-only views of one buffer; "lm_head.weight" is the embedding, as in the paper's
        tied model, so torch's load_state_dict takes it as is (torch.from_numpy needs a
        writeable copy: np.array(a) or torch.tensor(a))."""
        flat = self._m.flat_weights()
        out = {}
        for name, shape, offset in self._m.param_table():
            out[name] = flat[offset:offset + math.prod(shape)].reshape(shape)
        out[_TIED_HEAD] = out[_EMBEDDING]
        return out

    def load_state_dict(self, state_dict: Mapping[str, Any]) -> None:
        """Replaces the weights with those of a state dict (numpy arrays or torch tensors under
        the reference names; "_orig_mod." prefixes and a tied "lm_head.weight" accepted)."""
        flat = _flat_weights(self._m.param_table(), _args.mapping("state_dict", state_dict))
        tokenizer = self._tokenizer_spec or self._tokenizer_name()
        self._m = _sps.Model.from_weights(json.dumps(self.config), flat, self.device,
                                          "state_dict", tokenizer)

    def _tokenizer_name(self) -> Optional[str]:
        try:
            return self._m.tokenizer.name
        except _sps.InputError:
            return None


def _float32(name: str, value: Any) -> np.ndarray:
    if hasattr(value, "detach"):  # a torch tensor (bfloat16 has no numpy type)
        value = value.detach().to("cpu").float().numpy()
    try:
        return np.asarray(value, dtype=np.float32)
    except (TypeError, ValueError) as e:
        raise _sps.InputError(f"state_dict[{name!r}]: not an array of numbers ({e})") from None


def _flat_weights(table, state_dict: Mapping[str, Any]) -> np.ndarray:
    """The flat float32 weights (ParamTable order) from a state dict, every name and shape
    checked."""
    names = list(state_dict.keys())
    prefixed = [n for n in names if n.startswith(_COMPILE_PREFIX)]
    if prefixed and len(prefixed) != len(names):
        raise _sps.InputError("state_dict: mixes names with and without the '_orig_mod.' prefix")
    tensors = {n[len(_COMPILE_PREFIX):] if prefixed else n: state_dict[n] for n in names}
    expected = {name for name, _, _ in table} | {_TIED_HEAD}
    unexpected = sorted(set(tensors) - expected)
    if unexpected:
        raise _sps.InputError(f"state_dict: unexpected parameter {unexpected[0]!r} "
                              f"({len(unexpected)} unexpected in all)")
    total = sum(math.prod(shape) for _, shape, _ in table)
    flat = np.empty(total, dtype=np.float32)
    for name, shape, offset in table:
        if name not in tensors:
            raise _sps.InputError(f"state_dict: missing parameter {name!r}")
        a = _float32(name, tensors[name])
        if a.shape != tuple(shape):
            raise _sps.InputError(f"state_dict[{name!r}]: shape {list(a.shape)}, expected {list(shape)}")
        flat[offset:offset + a.size] = a.reshape(-1)
    if _TIED_HEAD in tensors:
        head = _float32(_TIED_HEAD, tensors[_TIED_HEAD])
        wte = next((offset, shape) for name, shape, offset in table if name == _EMBEDDING)
        embedding = flat[wte[0]:wte[0] + math.prod(wte[1])].reshape(wte[1])
        if head.shape != embedding.shape or not np.array_equal(head, embedding):
            raise _sps.InputError(f"state_dict: {_TIED_HEAD!r} differs from {_EMBEDDING!r}; the "
                                  "model ties them (one embedding table)")
    return flat


def load(path: PathLike, device: str = "cpu", weights: str = "f32",
         tokenizer: Optional[PathLike] = None, kv_cache: str = "f32") -> Model:
    """A model from a checkpoint folder (model.safetensors + config.yaml) or a run folder (its
    newest complete checkpoint), as `sps generate --checkpoint` loads it. device: "cpu" or
    "cuda[:N]". weights: how the projection weights are held: "f32" (exact), "bf16" or "int8" (CPU only). tokenizer: "gpt2", a folder or a
    rank file (default: the one the config names). kv_cache: how generation holds the KV cache:
    "f32" (exact) or "bf16" (half the bytes; CPU only), as `--kv-type`."""
    spec = _args.optional_path("tokenizer", tokenizer)
    return Model(_sps.Model.load(_args.path("path", path), _args.text("device", device),
                                 _args.text("weights", weights), spec,
                                 _args.text("kv_cache", kv_cache)), spec)


def from_state_dict(state_dict: Mapping[str, Any], config: Union[Mapping[str, Any], Model],
                    device: str = "cpu", tokenizer: Optional[PathLike] = None) -> Model:
    """A model of `config` (a dict of model fields, as Model.config) with a state dict's
    weights (see Model.load_state_dict)."""
    if isinstance(config, Model):
        config = config.config
    # numpy scalars as their Python values; anything else as text, for the engine to refuse
    text = json.dumps(dict(_args.mapping("config", config)),
                      default=lambda v: v.item() if isinstance(v, np.generic) else str(v))
    flat = _flat_weights(_sps.param_table(text), _args.mapping("state_dict", state_dict))
    spec = _args.optional_path("tokenizer", tokenizer)
    return Model(_sps.Model.from_weights(text, flat, _args.text("device", device), "state_dict",
                                         spec), spec)


def from_torch_checkpoint(path: PathLike, family: Optional[str] = None,
                          window: Optional[int] = None, device: str = "cpu",
                          tokenizer: Optional[PathLike] = None) -> Model:
    """A model from the paper's reference trainer's torch.save checkpoint, read through the
    restricted unpickler of `sps convert` (nothing in the file is executed). family and window
    are needed only where the checkpoint does not say them."""
    spec = _args.optional_path("tokenizer", tokenizer)
    return Model(_sps.Model.from_torch_checkpoint(
        _args.path("path", path), _args.optional_text("family", family),
        _args.optional_integer("window", window), _args.text("device", device), spec), spec)

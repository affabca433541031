"""sps: State-Prediction Separation Transformers and their baselines, from Python.

The engine of the `sps` command in this process, on numpy arrays (docs/python.md):

    import sps
    model = sps.load("runs/demo/tiny_sps_w64")
    logits = model.logits(model.tokenizer.encode(["The kernel", "A file"]))  # [B, T, V]
    print(model.generate("The kernel", max_new_tokens=32).text)

Every long call runs without the GIL and stops at Ctrl-C; errors are sps.Error subclasses
carrying the commands' one-line messages.
"""
from ._sps import Error, InputError, InternalError, NotFoundError
from ._data import open_tokens, prepare, validation_windows
from ._generation import Generation, GenerationStream, TokenEvent, TokenLogprob
from ._model import Model, from_state_dict, from_torch_checkpoint, load
from ._tokenizer import Tokenizer
from ._train import evaluate, train

__version__ = "0.1.0"

__all__ = [
    "Error",
    "InputError",
    "NotFoundError",
    "InternalError",
    "Tokenizer",
    "Model",
    "load",
    "from_state_dict",
    "from_torch_checkpoint",
    "Generation",
    "GenerationStream",
    "TokenEvent",
    "TokenLogprob",
    "train",
    "evaluate",
    "prepare",
    "open_tokens",
    "validation_windows",
]

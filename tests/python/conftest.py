"""Fixtures of the Python module's tests: the `sps` binary of the same build, a byte-level
tokenizer, a small text corpus, its token files, and micro models trained by `sps train`
(a standard and an sps one), all made once per session in a temporary folder.

The tests run with PYTHONPATH=build/<preset>/python (the module of that build) and
SPS_BINARY=build/<preset>/sps; tests that need the binary skip where it is not built (the
sanitizer preset builds no binary)."""
from __future__ import annotations

import base64
import json
import os
import random
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

import sps

SOURCE_DIR = Path(__file__).resolve().parents[2]
SPS_BINARY = Path(os.environ.get("SPS_BINARY", SOURCE_DIR / "build" / "release" / "sps"))

# The micro model of the C++ inference tests over the byte tokenizer: 256 bytes, EOS 256,
# PREDICT 257, V 320, PAD 319, block_size 16.
BYTE_MODEL = {"n_layer": 2, "n_head": 2, "hidden_size": 16, "intermediate_size": 24,
              "vocab_size": 320, "block_size": 16, "window_size": 4, "eos_token_id": 256,
              "predict_token_id": 257, "pad_token_id": 319, "init_std": 0.2}


def run_sps(*args, input: bytes | None = None, check: bool = True) -> subprocess.CompletedProcess:
    """Runs the sps binary; its stdout and stderr as bytes."""
    if not SPS_BINARY.exists():
        pytest.skip(f"{SPS_BINARY} is not built (this preset builds no binary)")
    result = subprocess.run([str(SPS_BINARY), *map(str, args)], input=input, capture_output=True,
                            env={**os.environ, "OMP_WAIT_POLICY": "passive"})
    if check and result.returncode != 0:
        raise AssertionError(f"sps {' '.join(map(str, args))} failed ({result.returncode}): "
                             f"{result.stderr.decode(errors='replace')}")
    return result


def write_byte_tokenizer(path: Path) -> Path:
    """A tiktoken rank file of the 256 single bytes (ids = bytes; EOS 256)."""
    path.write_text("".join(f"{base64.b64encode(bytes([b])).decode()} {b}\n" for b in range(256)))
    return path


WORDS = ("the kernel reads a page from the file and maps it into memory when the process asks "
         "for more space the scheduler picks the next task by its priority and its time slice "
         "python objects carry a reference count and a type every module has a dictionary of "
         "names functions close over their free variables").split()


def write_corpus(folder: Path, documents: int = 48, seed: int = 5) -> Path:
    """Text files of pseudo-sentences, one document each."""
    rng = random.Random(seed)
    folder.mkdir(parents=True, exist_ok=True)
    for i in range(documents):
        sentences = []
        for _ in range(rng.randint(3, 9)):
            words = [rng.choice(WORDS) for _ in range(rng.randint(4, 12))]
            sentences.append(" ".join(words).capitalize() + ".")
        (folder / f"doc{i:03d}.txt").write_text(" ".join(sentences) + "\n")
    return folder


def micro_recipe(path: Path, data: Path, family: str, out: Path, steps: int = 30,
                 **training) -> Path:
    """A training recipe for the byte micro model: 4 sequences of 16 tokens per step."""
    model = dict(BYTE_MODEL, family=family)
    settings = {"micro_batch_size": 2, "global_batch_size": 4, "max_tokens": steps * 64,
                "eval_total_tokens": 64, "eval_interval_tokens": 10 * 64, "log_interval": 1,
                "save_every": 20 * 64, **training}
    recipe = {"model": model, "training": settings, "optimizer": {"learning_rate": 0.01},
              "scheduler": {"warmup_tokens": steps // 5 * 64, "lr_decay_tokens": steps // 3 * 64,
                            "min_lr": 0.001},
              "data": {"dataset": str(data)},
              "system": {"threads": 1, "out_dir": str(out)}}
    path.write_text(json.dumps(recipe))  # JSON is YAML
    return path


class World:
    """What the session's tests share (see the module docstring)."""

    def __init__(self, root: Path) -> None:
        self.root = root
        self.tokenizer = write_byte_tokenizer(root / "bytes.tiktoken")
        self.corpus = write_corpus(root / "corpus")
        self.data = root / "data"
        run_sps("data", "prepare", self.corpus, "--out", self.data, "--tokenizer", self.tokenizer,
                "--val-fraction", "0.3")
        self.runs = {}
        for family in ("standard", "sps"):
            out = root / "runs" / family
            recipe = micro_recipe(root / f"{family}.yaml", self.data, family, out)
            run_sps("train", "--config", recipe)
            self.runs[family] = out

    def recipe(self, family: str) -> Path:
        return self.root / f"{family}.yaml"


@pytest.fixture(scope="session")
def world(tmp_path_factory) -> World:
    return World(tmp_path_factory.mktemp("world"))


@pytest.fixture(scope="session")
def sps_model(world) -> sps.Model:
    return sps.load(world.runs["sps"])


@pytest.fixture(scope="session")
def standard_model(world) -> sps.Model:
    return sps.load(world.runs["standard"])


def random_model(family: str = "sps", seed: int = 3, **config) -> sps.Model:
    """A byte micro model (or another shape) with random weights, from a state dict."""
    shape = dict(BYTE_MODEL, family=family, **config)
    rng = np.random.default_rng(seed)
    table = sps._sps.param_table(json.dumps(shape))
    state = {name: (rng.standard_normal(size=tuple(s)) * 0.2).astype(np.float32)
             for name, s, _ in table}
    for name in state:
        if name.endswith("norm.weight"):
            state[name] = 1 + state[name]
    return sps.from_state_dict(state, shape)


def python_script(code: str) -> list:
    """argv running `code` with this interpreter and this build's module."""
    return [sys.executable, "-c", code]

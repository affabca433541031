"""Arrays: results own the engine's buffers (no second copy), and every array keeps what it
views alive however long Python holds it. Run under the sanitizer build too."""
import gc
import json
import os
import weakref

import numpy as np

import sps
from conftest import BYTE_MODEL, random_model


def resident_bytes():
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * 4096


def reset_peak_resident_bytes():
    with open("/proc/self/clear_refs", "w") as f:
        f.write("5")  # the peak (VmHWM) starts again from the current resident set


def peak_resident_bytes():
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith("VmHWM:"):
                return int(line.split()[1]) * 1024


def test_logits_are_the_engines_buffer_and_outlive_the_model():
    model = random_model("sps")
    tokens = np.arange(100, 116)[None, :]
    logits = model.logits(tokens)
    assert logits.flags.owndata is False and logits.base is not None  # the engine's buffer
    assert logits.flags.writeable and logits.flags.c_contiguous
    want = logits.copy()
    ref = weakref.ref(model)
    del model
    gc.collect()
    assert ref() is None
    view = logits[0, 3:9]
    del logits
    gc.collect()
    np.testing.assert_array_equal(view, want[0, 3:9])
    view += 1  # still writeable memory of its own
    np.testing.assert_array_equal(view, want[0, 3:9] + 1)


def test_a_large_batchs_logits_cost_one_copy_of_memory():
    # tiny's shape (V = 8256) with random weights: [8, 256, V] float32 logits are 64.5 MiB.
    config = dict(BYTE_MODEL, family="sps", n_layer=2, n_head=4, hidden_size=64,
                  intermediate_size=128, vocab_size=8256, block_size=256, eos_token_id=8191,
                  predict_token_id=8192, pad_token_id=8255)
    table = sps._sps.param_table(json.dumps(config))
    rng = np.random.default_rng(0)
    state = {n: rng.standard_normal(tuple(s)).astype(np.float32) * 0.02 for n, s, _ in table}
    model = sps.from_state_dict(state, config)
    del state
    tokens = rng.integers(0, 8191, size=(8, 256))
    model.logits(tokens[:1, :8])  # first-call costs (threads, plans) out of the count
    gc.collect()
    before = resident_bytes()
    reset_peak_resident_bytes()
    logits = model.logits(tokens)
    grown = peak_resident_bytes() - before
    assert logits.nbytes == 8 * 256 * 8256 * 4
    # The activations of an inference plan of [8, 256] are a few MiB; a second copy of the
    # logits, even a passing one, would be another 64.5 MiB at the peak. Under AddressSanitizer
    # (its runtime preloaded) the shadow of every byte (1/8) and the quarantine that keeps
    # freed activations from being reused add about a third.
    sanitized = "libasan" in os.environ.get("LD_PRELOAD", "")
    assert grown < (1.6 if sanitized else 1.3) * logits.nbytes, \
        f"peak RSS grew {grown / 2**20:.1f} MiB for {logits.nbytes / 2**20:.1f} MiB of logits"
    assert np.isfinite(logits[:, -1]).all()


def test_state_dict_views_outlive_the_model(world):
    model = sps.load(world.runs["sps"])
    state = model.state_dict()
    embedding = state["transformer.wte.weight"]
    assert not embedding.flags.writeable
    assert state["lm_head.weight"] is embedding
    want = embedding.copy()
    del model, state
    gc.collect()
    np.testing.assert_array_equal(embedding, want)
    imported = random_model("standard")
    block = imported.state_dict()["transformer.h.1.mlp.down_proj.weight"]
    # Views of the weights it was made from, not copies.
    assert np.shares_memory(block, imported.state_dict()["transformer.h.1.mlp.down_proj.weight"])
    copy = block.copy()
    del imported
    gc.collect()
    np.testing.assert_array_equal(block, copy)


def test_a_token_file_is_a_read_only_map_that_outlives_its_name(world, tmp_path):
    path = tmp_path / "train.bin"
    path.write_bytes((world.data / "train.bin").read_bytes())
    tokens = sps.open_tokens(path)
    assert tokens.dtype == np.uint16 and not tokens.flags.writeable and tokens.base is not None
    np.testing.assert_array_equal(tokens, np.fromfile(path, np.uint16))
    tail = tokens[-100:]
    want = tail.copy()
    del tokens
    path.unlink()  # the mapping holds the file
    gc.collect()
    np.testing.assert_array_equal(tail, want)


def test_tokenizer_ids_own_their_buffer(world):
    ids = sps.Tokenizer(world.tokenizer).encode("hello")
    assert ids.dtype == np.uint32 and ids.tolist() == list(b"hello")

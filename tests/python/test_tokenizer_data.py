"""Tokenizers and token files: the same ids and bytes as `sps tokenizer`, the same files as
`sps data prepare`."""
import json
import os
from pathlib import Path

import numpy as np
import pytest

import sps
from conftest import run_sps, write_byte_tokenizer

TEXTS = ["Hello world", "  two  spaces\tand a tab\n", "ünïcödé ✓ 日本語", "", "<|endoftext|> x",
         "a" * 300]


def cli_encode(spec, text: bytes):
    out = run_sps("tokenizer", "encode", "--tokenizer", spec, input=text).stdout.split()
    return [int(i) for i in out]


def have_gpt2():
    home = Path(os.environ.get("SPS_HOME", Path.home() / ".cache" / "sps"))
    return (home / "gpt2" / "encoder.json").exists()


def tokenizers(world):
    """The byte rank file, and GPT-2's files where `make deps` installed them."""
    return [str(world.tokenizer)] + (["gpt2"] if have_gpt2() else [])


def test_the_same_ids_and_bytes_as_sps_tokenizer(world):
    for spec in tokenizers(world):
        t = sps.Tokenizer(spec)
        batch = t.encode(TEXTS)
        for text, ids in zip(TEXTS, batch):
            want = cli_encode(spec, text.encode())
            assert ids.dtype == np.uint32 and ids.tolist() == want
            assert t.encode(text).tolist() == want
            decoded = run_sps("tokenizer", "decode", "--tokenizer", spec,
                              input=" ".join(map(str, want)).encode()).stdout
            assert t.decode_bytes(ids) == decoded
            assert t.decode(ids) == text
        # Ill-formed UTF-8 as bytes: repaired as the command repairs it.
        raw = b"ok \xff\xfe bytes \xe2\x82"
        assert t.encode(raw).tolist() == cli_encode(spec, raw)
        # A character split between ids decodes to U+FFFD, its bytes stay whole.
        ids = t.encode("✓")
        if len(ids) > 1:
            assert t.decode(ids[:1]) == "\ufffd"


def test_gpt2_special_ids():
    if not have_gpt2():
        pytest.skip("GPT-2's files are not installed (make deps)")
    t = sps.Tokenizer()
    assert (t.vocab_size, t.eos_id, t.predict_id, t.padded_vocab_size, t.pad_id) == (
        50257, 50256, 50257, 50304, 50303)
    assert t.decode([50256]) == "<|endoftext|>"


def test_prepare_writes_the_files_sps_data_prepare_writes(world, tmp_path):
    run_sps("data", "prepare", world.corpus, "--out", tmp_path / "cli", "--tokenizer",
            world.tokenizer, "--val-fraction", "0.3")
    report = sps.prepare(world.corpus, tmp_path / "py", tokenizer=world.tokenizer,
                         val_fraction=0.3, progress=False)
    for name in ("train.bin", "val.bin"):
        assert (tmp_path / "py" / name).read_bytes() == (tmp_path / "cli" / name).read_bytes()
    meta = {k: v for k, v in json.loads((tmp_path / "py" / "meta.json").read_text()).items()}
    cli_meta = json.loads((tmp_path / "cli" / "meta.json").read_text())
    for key in ("train", "val", "tokenizer", "dtype", "vocab_size"):
        assert meta.get(key) == cli_meta.get(key), key
    train = sps.open_tokens(tmp_path / "py" / "train.bin")
    assert report["train"]["tokens"] == len(train)
    assert report["train"]["max_id"] == int(train.max())
    assert report["val"]["documents"] + report["train"]["documents"] == 48
    # uint32 on request (meta.json says so, and open_tokens reads it).
    sps.prepare(world.corpus, tmp_path / "wide", tokenizer=world.tokenizer, dtype="uint32",
                val_fraction=0.3, progress=False)
    wide = sps.open_tokens(tmp_path / "wide" / "train.bin")
    assert wide.dtype == np.uint32
    np.testing.assert_array_equal(wide, train)


def test_prepare_takes_one_include_pattern_as_a_str(tmp_path):
    folder = tmp_path / "texts"
    folder.mkdir()
    (folder / "a.txt").write_text("the kernel maps a page\n")
    (folder / "b.md").write_text("not this one\n")
    report = sps.prepare(folder, tmp_path / "out", tokenizer=write_byte_tokenizer(tmp_path / "b"),
                         include="*.txt", val_fraction=0.0, progress=False)
    assert report["files"] == 1
    assert report["train"]["tokens"] == len("the kernel maps a page\n") + 1  # and its EOS


def test_validation_windows_are_the_trainers():
    starts = sps.validation_windows(1000, 16, 100, 42)
    assert starts.dtype == np.int64 and len(starts) == 7
    assert ((starts >= 0) & (starts <= 1000 - 16 - 1)).all()
    np.testing.assert_array_equal(starts, sps.validation_windows(1000, 16, 100, 42))

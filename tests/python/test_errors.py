"""Bad input raises the documented sps.Error subclass with a one-line message naming the
argument or the file, and never crashes the interpreter."""
import os
import shutil

import numpy as np
import pytest

import sps
from conftest import random_model, write_byte_tokenizer


@pytest.fixture(scope="module")
def model():
    return random_model("sps")


def check(error, words, call):
    with pytest.raises(error) as raised:
        call()
    message = str(raised.value)
    assert "\n" not in message, message
    for word in words:
        assert word in message, message
    return message


def test_the_hierarchy():
    assert issubclass(sps.InputError, sps.Error) and issubclass(sps.InputError, ValueError)
    assert issubclass(sps.NotFoundError, sps.Error) and issubclass(sps.NotFoundError, FileNotFoundError)
    assert issubclass(sps.InternalError, sps.Error) and issubclass(sps.InternalError, RuntimeError)


@pytest.mark.parametrize("name, tokens, words", [
    ("float dtype", np.zeros((1, 4), np.float32), ["tokens", "integer", "float32"]),
    ("bool dtype", np.zeros((1, 4), bool), ["tokens", "integer", "bool"]),
    ("strings", ["a", "b"], ["tokens", "integer"]),
    ("3-D", np.zeros((1, 2, 3), np.int64), ["tokens", "3 dimensions"]),
    ("empty batch", np.zeros((0, 4), np.int32), ["tokens", "empty batch"]),
    ("empty rows", np.zeros((2, 0), np.int32), ["tokens", "no tokens"]),
    ("negative id", np.array([[1, -1, 3]]), ["tokens", "id -1", "[0, 1]"]),
    ("id = V", np.array([[1, 2, 320]], np.int32), ["tokens", "id 320", "[0, 2]", "[0, 320)"]),
    ("id >= V, int64", np.array([5, 1000]), ["tokens", "id 1000", "[1]"]),
    ("too long", np.zeros((1, 17), np.int32), ["tokens", "17", "block_size of 16"]),
    ("not an array", object(), ["tokens", "integer", "object"]),
])
def test_logits_refuses(model, name, tokens, words):
    check(sps.InputError, words, lambda: model.logits(tokens))


@pytest.mark.parametrize("tokens, words", [
    (np.zeros((1, 1), np.int32), ["tokens", "at least 2"]),
    (np.zeros((1, 18), np.int32), ["tokens", "17", "block_size of 16"]),
    (np.array([[1.5, 2.0]]), ["tokens", "integer"]),
])
def test_nll_refuses(model, tokens, words):
    check(sps.InputError, words, lambda: model.nll(tokens))


def test_generation_refuses(model):
    check(sps.InputError, ["prompts[1]", "id 999"], lambda: model.generate([[1, 2], [999]], 4))
    check(sps.InputError, ["prompts", "empty batch"], lambda: model.generate([], 4))
    check(sps.InputError, ["truncate", "sideways"], lambda: model.generate([[1]], 4, truncate="sideways"))
    # The engine's checks, with the argument's name where the command names its flag.
    assert check(sps.InputError, ["top_p must be in (0, 1]"],
                 lambda: model.generate([[1]], 4, temperature=1, top_p=0)).startswith("top_p ")
    check(sps.InputError, ["max_new_tokens must be >= 0", "-1"], lambda: model.generate([[1]], -1))
    check(sps.InputError, ["forbid 999", "not an id"], lambda: model.generate([[1]], 2, forbid=[999]))
    check(sps.InputError, ["prefill_rows", "-2"], lambda: model.generate([[1]], 2, prefill_rows=-2))
    check(sps.InputError, ["prefill_rows", "5000"], lambda: model.stream([[1]], 2, prefill_rows=5000))
    check(sps.InputError, ["prompt 0", "longer than the model's context"],
          lambda: model.generate([list(range(20))], 2))
    # Text needs a tokenizer, and this model's config names none.
    check(sps.InputError, ["tokenizer"], lambda: model.generate("hello", 2))


@pytest.mark.parametrize("argument, value, expected", [
    ("max_new_tokens", "4", "an integer, got str '4'"),
    ("max_new_tokens", 4.0, "an integer, got float 4.0"),
    ("temperature", "hot", "a number, got str"),
    ("temperature", True, "a number, got bool"),
    ("top_k", None, "an integer, got NoneType"),
    ("top_p", [0.5], "a number, got list"),
    ("seed", 1.5, "an integer"),
    ("ignore_eos", 1, "True or False, got int"),
    ("truncate", 3, "a str, got int"),
    ("logprobs", "2", "an integer"),
    ("prefill_rows", 2.5, "an integer"),
    ("stop", [".", 3], "a str, got int"),
    ("forbid", [1, "x"], "an integer, got str"),
    # integers the engine's C++ types cannot hold
    ("seed", -1, "an integer in [0, 18446744073709551615], got -1"),
    ("seed", 2**64, "an integer in [0, 18446744073709551615], got 18446744073709551616"),
    ("max_new_tokens", 2**63, "an integer in [-9223372036854775808, 9223372036854775807]"),
    ("forbid", [1, 2**40], "an integer in [-2147483648, 2147483647], got 1099511627776"),
])
def test_generation_names_an_argument_of_the_wrong_type(model, argument, value, expected):
    kwargs = {"max_new_tokens": 2}
    kwargs[argument] = value
    named = f"{argument}[1]" if argument in ("stop", "forbid") else argument
    check(sps.InputError, [f"{named}: expected {expected}"], lambda: model.generate([[1]], **kwargs))


def test_scoring_and_evaluation_name_an_argument_of_the_wrong_type(model):
    check(sps.InputError, ["batch: expected an integer, got str"],
          lambda: model.loglikelihood([1], [2], batch="8"))
    check(sps.InputError, ["scoring: expected a str"], lambda: model.loglikelihood([1], [2], scoring=1))
    check(sps.InputError, ["batch: expected an integer"], lambda: model.loglikelihood_rolling([[1, 2]], batch=1.0))
    check(sps.InputError, ["limit: expected an integer"], lambda: model.evaluate("val", limit="all"))
    check(sps.InputError, ["stop_after: expected an integer"], lambda: sps.train("x.yaml", stop_after="2"))
    # numpy scalars are numbers
    assert len(model.generate([1], np.int64(2), temperature=np.float32(0.5), seed=np.uint8(3)).tokens) >= 1


def test_requests_and_models_name_an_argument_of_the_wrong_type(model, tmp_path):
    check(sps.InputError, ["prompts: expected a prompt (str, bytes or token ids) or a list",
                           "int 5"], lambda: model.generate(5, 2))
    check(sps.InputError, ["context: expected a list of (context, continuation) pairs", "int 5"],
          lambda: model.loglikelihood(5))
    check(sps.InputError, ["text: expected a text", "float 1.5"],
          lambda: model.loglikelihood_rolling(1.5))
    check(sps.InputError, ["progress: expected True or False"],
          lambda: model.loglikelihood_rolling([[1, 2]], progress="yes"))
    check(sps.InputError, ["task_files['piqa']: expected a path", "int 3"],
          lambda: model.evaluate("piqa", task_files={"piqa": 3}))
    check(sps.InputError, ["task_files: expected a dict", "list"],
          lambda: model.evaluate("piqa", task_files=["piqa.jsonl"]))
    check(sps.InputError, ["state_dict: expected a dict", "list"],
          lambda: model.load_state_dict([]))
    check(sps.InputError, ["config: expected a dict", "int 5"],
          lambda: sps.from_state_dict(model.state_dict(), 5))
    check(sps.InputError, ["device: expected a str", "int 0"],
          lambda: sps.from_state_dict(model.state_dict(), model.config, device=0))
    # numpy scalars in a config are numbers
    assert sps.from_state_dict(model.state_dict(),
                               dict(model.config, n_layer=np.int64(2))).config["n_layer"] == 2
    missing = tmp_path / "nothing"
    check(sps.InputError, ["path: expected a path (str or os.PathLike)", "int 5"],
          lambda: sps.load(5))
    check(sps.InputError, ["device: expected a str", "int 0"], lambda: sps.load(missing, device=0))
    check(sps.InputError, ["weights: expected a str", "NoneType"],
          lambda: sps.load(missing, weights=None))
    check(sps.InputError, ["tokenizer: expected a path", "int 3"],
          lambda: sps.load(missing, tokenizer=3))
    check(sps.InputError, ["family: expected a str", "int 3"],
          lambda: sps.from_torch_checkpoint(missing, family=3))
    check(sps.InputError, ["window: expected an integer", "str '64'"],
          lambda: sps.from_torch_checkpoint(missing, window="64"))
    check(sps.InputError, ["config: expected a path", "NoneType"], lambda: sps.train(None))
    check(sps.InputError, ["overrides: expected a dict", "list"],
          lambda: sps.train(missing, ["training.max_tokens=5"]))
    check(sps.InputError, ["on_log: expected a callable or None", "int 5"],
          lambda: sps.train(missing, on_log=5))
    check(sps.InputError, ["checkpoint: expected a path", "int 5"], lambda: sps.evaluate(5))


def test_scoring_refuses(model):
    check(sps.InputError, ["continuation[0]", "empty"], lambda: model.loglikelihood([1, 2], []))
    check(sps.InputError, ["batch", "at least 1"], lambda: model.loglikelihood([1], [2], batch=0))
    check(sps.InputError, ["scoring", "clever"], lambda: model.loglikelihood([1], [2], scoring="clever"))
    check(sps.InputError, ["text[0]", "id 400"], lambda: model.loglikelihood_rolling([[1, 400]]))


def test_missing_files(tmp_path):
    missing = tmp_path / "nothing"
    check(sps.NotFoundError, ["path", str(missing)], lambda: sps.load(missing))
    check(sps.NotFoundError, ["spec", str(missing)], lambda: sps.Tokenizer(missing))
    check(sps.NotFoundError, ["path", str(missing)], lambda: sps.open_tokens(missing))
    check(sps.NotFoundError, ["config", str(missing)], lambda: sps.train(missing))
    check(sps.NotFoundError, ["inputs[0]"], lambda: sps.prepare([missing], tmp_path / "out"))
    check(sps.NotFoundError, ["path"], lambda: sps.from_torch_checkpoint(missing))


def test_load_refuses(world, tmp_path):
    check(sps.InputError, ["weights", "fp8", "f32, bf16 or int8"],
          lambda: sps.load(world.runs["sps"], weights="fp8"))
    check(sps.InputError, ["kv_cache", "fp16", "f32 or bf16"],
          lambda: sps.load(world.runs["sps"], kv_cache="fp16"))
    check(sps.InputError, ["device", "tpu"], lambda: sps.load(world.runs["sps"], device="tpu"))
    empty = tmp_path / "empty"
    empty.mkdir()
    check(sps.InputError, [str(empty), "neither a checkpoint folder"], lambda: sps.load(empty))


def test_damaged_checkpoints(world, tmp_path):
    source = world.runs["sps"] / "checkpoints" / "final"
    truncated = tmp_path / "truncated"
    shutil.copytree(source, truncated)
    weights = truncated / "model.safetensors"
    os.truncate(weights, weights.stat().st_size // 2)
    check(sps.InputError, [str(weights)], lambda: sps.load(truncated))
    garbage = tmp_path / "garbage"
    shutil.copytree(source, garbage)
    (garbage / "model.safetensors").write_bytes(b"\x10\x00\x00\x00\x00\x00\x00\x00not json at all!")
    check(sps.InputError, ["model.safetensors"], lambda: sps.load(garbage))
    bad_config = tmp_path / "bad_config"
    shutil.copytree(source, bad_config)
    (bad_config / "config.yaml").write_text("model: {family: sideways}\n")
    check(sps.InputError, ["config.yaml"], lambda: sps.load(bad_config))
    not_a_pickle = tmp_path / "ckpt.pt"
    not_a_pickle.write_bytes(b"PK\x03\x04 this is no zip archive")
    check(sps.InputError, [str(not_a_pickle)], lambda: sps.from_torch_checkpoint(not_a_pickle))


def test_state_dict_refuses(model):
    state = {k: np.array(v) for k, v in model.state_dict().items()}
    wrong = dict(state)
    wrong["transformer.h.0.attn.c_attn.weight"] = np.zeros((3, 3), np.float32)
    check(sps.InputError, ["transformer.h.0.attn.c_attn.weight", "[3, 3]", "[48, 16]"],
          lambda: model.load_state_dict(wrong))
    missing = {k: v for k, v in state.items() if k != "transformer.output_norm.weight"}
    check(sps.InputError, ["missing", "transformer.output_norm.weight"], lambda: model.load_state_dict(missing))
    extra = dict(state, **{"transformer.h.9.attn.c_attn.weight": state["transformer.h.0.attn.c_attn.weight"]})
    check(sps.InputError, ["unexpected", "transformer.h.9"], lambda: model.load_state_dict(extra))
    untied = dict(state, **{"lm_head.weight": state["lm_head.weight"] + 1})
    check(sps.InputError, ["lm_head.weight", "differs"], lambda: model.load_state_dict(untied))
    check(sps.InputError, ["config", "n_layers"],
          lambda: sps.from_state_dict(state, dict(model.config, n_layers=2)))


def test_token_files_refuse(tmp_path):
    odd = tmp_path / "odd.bin"
    odd.write_bytes(b"\x01\x00\x02")
    check(sps.InputError, [str(odd), "whole number"], lambda: sps.open_tokens(odd))
    ids = tmp_path / "ids.bin"
    np.array([1, 2, 500], np.uint16).tofile(ids)
    check(sps.InputError, [str(ids), "500", "vocab_size"], lambda: sps.open_tokens(ids, vocab_size=320))
    check(sps.InputError, ["dtype", "int8"], lambda: sps.open_tokens(ids, dtype="int8"))


def test_tokenizer_refuses(tmp_path):
    t = sps.Tokenizer(write_byte_tokenizer(tmp_path / "bytes.tiktoken"))
    check(sps.InputError, ["ids", "300", "not a token id"], lambda: t.decode([65, 300]))
    check(sps.InputError, ["ids", "-1", "outside the vocabulary [0, 320)"],
          lambda: t.decode([65, -1]))
    check(sps.InputError, ["ids", "integer"], lambda: t.decode(["a"]))
    check(sps.InputError, ["ids", "integer", "float64"], lambda: t.decode(np.array([65.0, 66.0])))
    check(sps.InputError, ["ids", "1-D", "2 dimensions"], lambda: t.decode([[65], [66]]))
    check(sps.InputError, ["ids", "object"], lambda: t.decode(None))
    check(sps.InputError, ["text", "str or bytes", "int"], lambda: t.encode(5))
    check(sps.InputError, ["text[1]", "str or bytes", "NoneType"], lambda: t.encode(["a", None]))
    check(sps.InputError, ["spec: expected a path (str or os.PathLike), got int 5"],
          lambda: sps.Tokenizer(5))
    check(sps.InputError, ["spec: expected a path", "NoneType"], lambda: sps.Tokenizer(None))
    assert sps.Tokenizer(os.fsencode(tmp_path / "bytes.tiktoken")).vocab_size == t.vocab_size


def test_token_file_arguments_of_the_wrong_type(tmp_path):
    ids = tmp_path / "ids.bin"
    np.array([1, 2, 3], np.uint16).tofile(ids)
    check(sps.InputError, ["path: expected a path", "int 5"], lambda: sps.open_tokens(5))
    check(sps.InputError, ["dtype: expected a str", "int 16"],
          lambda: sps.open_tokens(ids, dtype=16))
    check(sps.InputError, ["vocab_size: expected an integer", "str '320'"],
          lambda: sps.open_tokens(ids, vocab_size="320"))
    check(sps.InputError, ["vocab_size: expected an integer in", "got 18446744073709551616"],
          lambda: sps.open_tokens(ids, vocab_size=2**64))
    check(sps.InputError, ["vocab_size: expected a count of ids >= 1, got 0"],
          lambda: sps.open_tokens(ids, vocab_size=0))
    check(sps.InputError, ["file_tokens: expected an integer", "str '100'"],
          lambda: sps.validation_windows("100", 10, 20))
    check(sps.InputError, ["block_size: expected an integer", "float 10.0"],
          lambda: sps.validation_windows(100, 10.0, 20))
    check(sps.InputError, ["seed: expected an integer in [0, 18446744073709551615], got -1"],
          lambda: sps.validation_windows(100, 10, 20, seed=-1))
    assert list(sps.open_tokens(ids, vocab_size=np.int32(4))) == [1, 2, 3]


@pytest.mark.parametrize("arguments, words", [
    ({"inputs": 5}, ["inputs: expected a path or a list of paths", "int 5"]),
    ({"inputs": ["CORPUS", 5]}, ["inputs[1]: expected a path", "int 5"]),
    ({"out": None}, ["out: expected a path", "NoneType"]),
    ({"tokenizer": 3}, ["tokenizer: expected a path", "int 3"]),
    ({"include": [1]}, ["include[0]: expected a str", "int 1"]),
    ({"format": None}, ["format: expected a str"]),
    ({"field": b"text"}, ["field: expected a str", "bytes"]),
    ({"split_blank_lines": 1}, ["split_blank_lines: expected True or False", "int 1"]),
    ({"val_fraction": "0.1"}, ["val_fraction: expected a number", "str '0.1'"]),
    ({"seed": -1}, ["seed: expected an integer in [0, 18446744073709551615], got -1"]),
    ({"shuffle_seed": 1.5}, ["shuffle_seed: expected an integer", "float 1.5"]),
    ({"shuffle": "no"}, ["shuffle: expected True or False"]),
    ({"dtype": np.uint16}, ["dtype: expected a str", "type"]),
    ({"threads": 2**40}, ["threads: expected an integer in [-2147483648, 2147483647]"]),
    ({"overwrite": None}, ["overwrite: expected True or False"]),
    ({"skip_bad_records": 0}, ["skip_bad_records: expected True or False"]),
    ({"progress": "off"}, ["progress: expected True or False"]),
])
def test_prepare_names_an_argument_of_the_wrong_type(tmp_path, arguments, words):
    corpus = tmp_path / "corpus"
    corpus.mkdir()
    (corpus / "a.txt").write_text("a few words\n")
    out = tmp_path / "out"
    options = {"tokenizer": write_byte_tokenizer(tmp_path / "b.tiktoken"), **arguments}
    inputs, target = options.pop("inputs", corpus), options.pop("out", out)
    if isinstance(inputs, list):
        inputs = [corpus if p == "CORPUS" else p for p in inputs]
    check(sps.InputError, words, lambda: sps.prepare(inputs, target, **options))
    assert not out.exists()  # refused before anything was written


def test_training_refuses(world, tmp_path):
    check(sps.InputError, ["training.max_tokenz"],
          lambda: sps.train(world.recipe("sps"), {"training.max_tokenz": 5}))
    check(sps.InputError, ["stop_after"], lambda: sps.train(world.recipe("sps"), stop_after=-2))

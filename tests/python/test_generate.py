"""Generation: the tokens of `sps generate` for the same flags, streamed token by token, with
logprobs on request."""
import json

import numpy as np
import pytest

import sps
from conftest import run_sps

PROMPTS = ["the kernel", "python obj", "", "a"]  # under block_size (16) bytes


def cli_batch(world, tmp_path, family, *flags, batch_size=8):
    prompts = tmp_path / "prompts.jsonl"
    prompts.write_text("".join(json.dumps({"prompt": p}) + "\n" for p in PROMPTS))
    out = tmp_path / "out.jsonl"
    run_sps("generate", "--checkpoint", world.runs[family], "--batch-file", prompts, "--output",
            out, "--batch-size", batch_size, *flags)
    return [json.loads(line) for line in out.read_text().splitlines()]


@pytest.mark.parametrize("family", ["standard", "sps"])
@pytest.mark.parametrize("flags, kwargs", [
    (["--max-new-tokens", "12"], dict(max_new_tokens=12)),
    (["--max-new-tokens", "12", "--temperature", "0.9", "--top-k", "20", "--top-p", "0.9",
      "--seed", "5"], dict(max_new_tokens=12, temperature=0.9, top_k=20, top_p=0.9, seed=5)),
    (["--max-new-tokens", "20", "--temperature", "1.2", "--seed", "3", "--stop", "e "],
     dict(max_new_tokens=20, temperature=1.2, seed=3, stop=["e "])),
])
def test_the_same_generations_as_sps_generate(world, tmp_path, family, flags, kwargs):
    want = cli_batch(world, tmp_path, family, *flags)
    got = sps.load(world.runs[family]).generate(PROMPTS, **kwargs)
    for g, w in zip(got, want):
        assert (g.text, g.tokens.tolist(), g.stop_reason, len(g.prompt_tokens)) == (
            w["completion"], w["completion_ids"], w["stop_reason"], w["prompt_tokens"])


def test_a_bf16_kv_cache_generates_what_the_command_does(world, tmp_path):
    want = cli_batch(world, tmp_path, "sps", "--max-new-tokens", "12", "--kv-type", "bf16")
    got = sps.load(world.runs["sps"], kv_cache="bf16").generate(PROMPTS, max_new_tokens=12)
    assert [g.text for g in got] == [w["completion"] for w in want]
    assert [g.tokens.tolist() for g in got] == [w["completion_ids"] for w in want]


def test_one_prompt_streams_what_the_command_prints(world, sps_model):
    out = run_sps("generate", "--checkpoint", world.runs["sps"], "--prompt", "the kernel",
                  "--max-new-tokens", "10", "--temperature", "0.8", "--seed", "11").stdout
    g = sps_model.generate("the kernel", 10, temperature=0.8, seed=11)
    assert (g.text + "\n").encode() == out
    events = list(sps_model.stream("the kernel", 10, temperature=0.8, seed=11))
    assert [e.id for e in events] == g.tokens.tolist()
    assert "".join(e.text for e in events) == g.text
    assert [e.last for e in events] == [False] * (len(events) - 1) + [True]
    ids = sps_model.tokenizer.encode("the kernel")
    assert sps_model.generate(ids, 10, temperature=0.8, seed=11).tokens.tolist() == g.tokens.tolist()


def test_a_stream_goes_step_by_step_over_the_rows(sps_model):
    stream = sps_model.stream(["ab", "the"], 5)
    events = list(stream)
    assert [e.row for e in events] == [0, 1] * 5
    results = stream.results()
    for row in (0, 1):
        assert [e.id for e in events if e.row == row] == results[row].tokens.tolist()
    assert stream.stats["generated_tokens"] == 10
    # Leaving a stream early is allowed; what it generated so far is kept.
    partial = sps_model.stream(["ab"], 50)
    first = [next(partial) for _ in range(3)]
    assert partial.results()[0].tokens.tolist() == [e.id for e in first]
    # finish() generates the rest: the same rows as a stream run to its end.
    rest = sps_model.stream(["ab", "the"], 5)
    head = [next(rest) for _ in range(3)]
    finished = rest.finish()
    assert [g.tokens.tolist() for g in finished] == [r.tokens.tolist() for r in results]
    first_steps = [results[0].tokens[0], results[1].tokens[0], results[0].tokens[1]]
    assert [e.id for e in head] == first_steps
    assert rest.stats["generated_tokens"] == 10


def test_logprobs_are_the_models_log_softmax(sps_model):
    g = sps_model.generate("the ", 6, temperature=1.0, seed=2, logprobs=3, ignore_eos=True)
    assert len(g.logprobs) == 6
    sequence = np.concatenate([g.prompt_tokens, g.tokens])
    logits = sps_model.logits(sequence[:-1]).astype(np.float64)
    m = logits.max(-1, keepdims=True)
    logp = logits - m - np.log(np.exp(logits - m).sum(-1, keepdims=True))
    P = len(g.prompt_tokens)
    for k, lp in enumerate(g.logprobs):
        row = logp[P - 1 + k]
        assert lp.id == g.tokens[k]
        assert lp.logprob == pytest.approx(row[lp.id], abs=1e-4)
        assert [i for i, _ in lp.top] == list(np.argsort(-row[:257], kind="stable")[:3])
        assert [v for _, v in lp.top] == pytest.approx(sorted(row[:257])[::-1][:3], abs=1e-4)
    assert sps_model.generate("the ", 3).logprobs is None


def test_ids_without_a_tokenizer_generate_ids(world):
    from conftest import random_model
    model = random_model("standard")
    g = model.generate([[1, 2, 3]], 5)[0]
    assert len(g.tokens) <= 5 and g.text == ""
    assert not set(g.tokens.tolist()) & {model.config["pad_token_id"], model.config["predict_token_id"]}

"""sps.load and the forward: logits, per-token NLL and lm-evaluation-harness's scores give
the numbers `sps eval` gives for the same model and text."""
import json
import math

import numpy as np
import pytest

import sps
from conftest import WORDS, run_sps


def log_softmax(x):
    m = x.max(-1, keepdims=True)
    return x - m - np.log(np.exp(x - m).sum(-1, keepdims=True))


def test_load_reads_the_checkpoint_and_its_config(world, sps_model):
    c = sps_model.config
    assert (c["family"], c["vocab_size"], c["block_size"], c["window_size"]) == ("sps", 320, 16, 4)
    assert sps_model.weights_path.endswith("final/model.safetensors")
    assert sps_model.tokenizer.name == str(world.tokenizer)
    assert sps_model.device == "cpu"
    # A checkpoint folder itself loads too, and the same weights.
    direct = sps.load(world.runs["sps"] / "checkpoints" / "final")
    tokens = np.arange(60, 76)
    np.testing.assert_array_equal(direct.logits(tokens), sps_model.logits(tokens))


def test_logits_and_nll_agree(sps_model):
    rng = np.random.default_rng(0)
    tokens = rng.integers(0, 256, size=(3, 16))
    tokens[1, 7] = 256  # an EOS: the term it feeds is left out
    logits = sps_model.logits(tokens[:, :-1])
    assert logits.shape == (3, 15, 320) and logits.dtype == np.float32
    nll = sps_model.nll(tokens)
    assert nll.shape == (3, 15) and nll.dtype == np.float64
    want = -np.take_along_axis(log_softmax(logits.astype(np.float64)), tokens[:, 1:, None], -1)[..., 0]
    kept = ~np.isnan(nll)
    assert kept.sum() == 3 * 15 - 1 and np.isnan(nll[1, 7])
    np.testing.assert_allclose(nll[kept], want[kept], rtol=1e-5, atol=1e-5)


def test_any_integer_dtype_and_layout_give_the_same_logits(sps_model):
    base = np.arange(10, 42, dtype=np.int32).reshape(2, 16)
    want = sps_model.logits(base)
    for variant in (base.astype(np.int64), base.astype(np.uint16), np.asfortranarray(base),
                    np.stack([base, base], 2)[:, :, 0], base.tolist()):
        np.testing.assert_array_equal(sps_model.logits(variant), want)
    np.testing.assert_array_equal(sps_model.logits(base[0]), want[0])  # 1-D: one sequence


def test_left_padded_rows_give_each_rows_own_logits(sps_model):
    pad = sps_model.config["pad_token_id"]
    short, long = np.arange(70, 76), np.arange(80, 92)
    batch = np.full((2, 12), pad)
    batch[0, 6:] = short
    batch[1] = long
    logits = sps_model.logits(batch)
    np.testing.assert_allclose(logits[0, 6:], sps_model.logits(short), rtol=1e-6, atol=1e-6)
    np.testing.assert_allclose(logits[1], sps_model.logits(long), rtol=1e-6, atol=1e-6)


@pytest.mark.parametrize("family", ["standard", "sps"])
def test_nll_is_the_validation_nll_of_sps_eval(world, tmp_path, family):
    model = sps.load(world.runs[family])
    val = world.data / "val.bin"
    out = tmp_path / "eval.json"
    run_sps("eval", "--checkpoint", world.runs[family], "--tasks", f"val:{val}", "--val-tokens",
            "200", "--out", out, "--quiet")
    want = json.loads(out.read_text())["val"]["nll"]
    tokens = sps.open_tokens(val)
    T = model.config["block_size"]
    starts = sps.validation_windows(len(tokens), T, 200, 42)
    rows = np.stack([tokens[s:s + T + 1] for s in starts])
    assert math.isclose(np.nanmean(model.nll(rows)), want, rel_tol=1e-12)


def documents(world, n=6):
    return [p.read_text() for p in sorted(world.corpus.iterdir())[:n]]


def test_rolling_loglikelihood_is_the_corpus_loglik_of_sps_eval(world, sps_model, tmp_path):
    texts = documents(world)
    corpus = tmp_path / "corpus.jsonl"
    corpus.write_text("".join(json.dumps({"text": t}) + "\n" for t in texts))
    out = tmp_path / "eval.json"
    run_sps("eval", "--checkpoint", world.runs["sps"], "--tasks", f"corpus:c={corpus}", "--out",
            out, "--quiet")
    want = json.loads(out.read_text())["corpus"]["c"]["loglik"]
    got = sps_model.loglikelihood_rolling(texts, batch=3)
    assert math.isclose(sum(got), want, rel_tol=1e-12)
    assert sps_model.loglikelihood_rolling(texts[0]) == got[0]
    ids = sps_model.tokenizer.encode(texts[0])
    assert sps_model.loglikelihood_rolling(ids) == got[0]


def test_loglikelihood_gives_the_task_numbers_of_sps_eval(world, sps_model, tmp_path):
    rng = np.random.default_rng(4)
    items = []
    for _ in range(8):
        context = " ".join(rng.choice(WORDS, 12))
        choices = [" ".join(rng.choice(WORDS, int(rng.integers(1, 4)))) for _ in range(3)]
        items.append({"context": context, "choices": choices, "label": int(rng.integers(0, 3))})
    cloze = [{"text": " ".join(rng.choice(WORDS, int(rng.integers(5, 25))))} for _ in range(8)]
    files = {"continuation": items, "cloze": cloze}
    args = []
    for name, rows in files.items():
        path = tmp_path / f"{name}.jsonl"
        path.write_text("".join(json.dumps(r) + "\n" for r in rows))
        args += ["--task-file", f"{name}={path}"]
    out = tmp_path / "eval.json"
    run_sps("eval", "--checkpoint", world.runs["sps"], "--tasks", "continuation,cloze", *args,
            "--out", out, "--quiet")
    want = json.loads(out.read_text())["tasks"]

    correct = correct_norm = 0
    for item in items:
        scores = sps_model.loglikelihood([(item["context"], " " + c) for c in item["choices"]])
        lls = [ll for ll, _ in scores]
        norm = [ll / len(" " + c) for ll, c in zip(lls, item["choices"])]
        correct += int(np.argmax(lls)) == item["label"]
        correct_norm += int(np.argmax(norm)) == item["label"]
    assert correct / len(items) == want["continuation"]["acc"]
    assert correct_norm / len(items) == want["continuation"]["acc_norm"]

    total, tokens, greedy = 0.0, 0, 0
    for row in cloze:
        context, last = row["text"].rsplit(" ", 1)
        ll, is_greedy = sps_model.loglikelihood(context, " " + last)
        total += ll
        tokens += len(sps_model.tokenizer.encode(" " + last))
        greedy += is_greedy
    assert greedy / len(cloze) == want["cloze"]["acc"]
    assert math.isclose(math.exp(-total / tokens), want["cloze"]["perplexity"], rel_tol=1e-12)
    # Both scorings (the cache's extend and the forward: the same numbers up to float
    # rounding), and ids instead of text.
    ctx, cont = cloze[0]["text"].rsplit(" ", 1)
    shared = sps_model.loglikelihood(ctx, " " + cont)
    assert sps_model.loglikelihood(ctx, " " + cont, scoring="naive") == pytest.approx(shared, rel=1e-6)
    ids = sps_model.tokenizer.encode([ctx, " " + cont])
    assert sps_model.loglikelihood(ids[0], ids[1]) == shared


def test_evaluate_returns_what_sps_eval_writes(world, tmp_path):
    corpus = tmp_path / "corpus.jsonl"
    corpus.write_text("".join(json.dumps({"text": t}) + "\n" for t in documents(world, 3)))
    tasks = f"val:{world.data / 'val.bin'},corpus:c={corpus}"
    out = tmp_path / "eval.json"
    run_sps("eval", "--checkpoint", world.runs["standard"], "--tasks", tasks, "--val-tokens", "100",
            "--out", out, "--quiet")
    want = json.loads(out.read_text())
    got = sps.evaluate(world.runs["standard"], tasks, val_tokens=100, progress=False)

    def timeless(x):
        if isinstance(x, dict):
            return {k: timeless(v) for k, v in x.items()
                    if k not in ("seconds", "tokens_per_second", "items_per_second")}
        return x
    assert timeless(got) == timeless(want)
    assert list(got) == list(want)  # the same keys in the same order


def round_to_bf16(a):
    bits = np.ascontiguousarray(a, dtype=np.float32).view(np.uint32).astype(np.uint64)
    bits = (bits + 0x7FFF + ((bits >> 16) & 1)) >> 16 << 16
    return bits.astype(np.uint32).view(np.float32)


def test_bf16_weights_are_near_the_f32_model_on_rounded_projections(world, sps_model):
    # weights="bf16" holds the projection matrices (every 2-D tensor: the blocks' four and the
    # tied table) rounded to bf16, and rounds each projection's input rows as well, summing in
    # fp32: near the f32 model on those rounded weights, but not the same.
    state = sps_model.state_dict()
    rounded = {k: round_to_bf16(v) if v.ndim == 2 else v for k, v in state.items()}
    want = sps.from_state_dict(rounded, sps_model).logits(np.arange(40, 56))
    got = sps.load(world.runs["sps"], weights="bf16").logits(np.arange(40, 56))
    assert not np.array_equal(got, want)
    np.testing.assert_allclose(got, want, atol=0.05)
    int8 = sps.load(world.runs["sps"], weights="int8").logits(np.arange(40, 56))
    assert not np.array_equal(int8, want)
    # int8 quantizes each linear's input rows too: the logits move by a few hundredths.
    np.testing.assert_allclose(int8, sps_model.logits(np.arange(40, 56)), atol=0.1)

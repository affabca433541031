"""The GIL is released during the engine's work: other Python threads run meanwhile, and two
threads run two models side by side with the results each gives alone."""
import threading
import time

import numpy as np
import pytest

import sps
from conftest import micro_recipe, random_model


def ticks_in_the_middle(call):
    """Runs call() on a worker thread while this thread counts its own bytecode steps; the
    steps taken in the middle half of the call, and the call's length."""
    span = {}

    def work():
        span["start"] = time.perf_counter()
        call()
        span["end"] = time.perf_counter()

    worker = threading.Thread(target=work)
    ticks = []
    worker.start()
    while worker.is_alive():
        ticks.append(time.perf_counter())  # Python bytecode on this thread
    worker.join()
    start, end = span["start"], span["end"]
    return [t for t in ticks if start + (end - start) / 4 < t < end - (end - start) / 4], end - start


def long_calls(world, tmp_path):
    model = random_model("sps", hidden_size=64, intermediate_size=128, n_head=4, n_layer=4,
                         block_size=16)
    model.generate([[1, 2, 3]], 4)  # warm
    tokens = np.random.default_rng(1).integers(0, 256, size=(128, 16))
    trained = sps.load(world.runs["sps"])
    text = tmp_path / "corpus.txt"  # one call, long enough to be timed
    text.write_text(" ".join(p.read_text() for p in sorted(world.corpus.iterdir())) * 4)
    return {
        "generate": lambda: model.generate([[1, 2, 3]] * 8, 200, ignore_eos=True),
        "logits": lambda: model.logits(tokens),
        "nll": lambda: model.nll(tokens),
        "loglikelihood_rolling": lambda: model.loglikelihood_rolling(
            [list(range(1, 256))] * 10, batch=4),
        "evaluate": lambda: trained.evaluate(f"corpus:c={text}", progress=False),
        "train": lambda: sps.train(micro_recipe(tmp_path / "r.yaml", world.data, "sps",
                                                tmp_path / "run", steps=40), progress=False),
    }


@pytest.mark.parametrize("name", ["generate", "logits", "nll", "loglikelihood_rolling",
                                  "evaluate", "train"])
def test_another_thread_makes_progress_while_the_engine_works(world, tmp_path, name):
    middle, took = ticks_in_the_middle(long_calls(world, tmp_path)[name])
    # Were the GIL held through the call, this thread would run no bytecode inside it (it
    # might get a switch interval at its edges, never in its middle half).
    assert len(middle) > 100, f"{len(middle)} ticks in the middle of a {took:.2f} s {name}"


def test_two_threads_run_two_models_with_their_own_results():
    a, b = random_model("sps", seed=1), random_model("standard", seed=2)
    tokens = np.random.default_rng(3).integers(0, 256, size=(4, 16))
    want = {"a": a.logits(tokens), "b": b.logits(tokens),
            "ga": a.generate([5, 6], 20, ignore_eos=True).tokens,
            "gb": b.generate([5, 6], 20, ignore_eos=True).tokens}
    got, errors = {}, []

    def run(name, model):
        try:
            for _ in range(5):
                got[name] = model.logits(tokens)
                got["g" + name] = model.generate([5, 6], 20, ignore_eos=True).tokens
        except Exception as e:  # noqa: BLE001 - reported below
            errors.append(e)

    threads = [threading.Thread(target=run, args=("a", a)), threading.Thread(target=run, args=("b", b))]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors
    for key in want:
        np.testing.assert_array_equal(got[key], want[key])


def test_one_model_shared_by_threads_takes_turns():
    model = random_model("sps", seed=4)
    tokens = np.arange(16)[None, :]
    want = model.logits(tokens)
    results = []
    threads = [threading.Thread(target=lambda: results.append(model.logits(tokens))) for _ in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert len(results) == 4
    for r in results:
        np.testing.assert_array_equal(r, want)

"""Ctrl-C (SIGINT to the process) interrupts a long generate or evaluate promptly with
KeyboardInterrupt, and a long prepare leaves nothing behind."""
import json
import os
import signal
import subprocess
import sys
import time

import pytest

from conftest import BYTE_MODEL, write_corpus

MODEL = """
import json, sys, time, numpy as np, sps
config = dict(BYTE_MODEL, family="sps", n_layer=4, hidden_size=64, n_head=4,
              intermediate_size=128, block_size=64)
table = sps._sps.param_table(json.dumps(config))
rng = np.random.default_rng(0)
model = sps.from_state_dict({n: rng.standard_normal(tuple(s)).astype(np.float32) * 0.1
                             for n, s, _ in table}, config, tokenizer=TOKENIZER)
"""


def model_code(world):
    return f"BYTE_MODEL = {BYTE_MODEL!r}\nTOKENIZER = {str(world.tokenizer)!r}\n" + MODEL


def interrupt(code, wait=0.3):
    """Runs `code` in a child that prints "started" before its long call; SIGINT after
    `wait` s. Returns (what the child printed last, stderr, seconds from the signal to the
    KeyboardInterrupt (the child prints time.monotonic() then), exit status)."""
    # One thread: on a busy machine a team of two waits at every barrier for a core, which
    # would time the machine rather than the stop.
    child = subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.PIPE,
                             stderr=subprocess.PIPE, env=dict(os.environ, OMP_NUM_THREADS="1"),
                             text=True)
    line = child.stdout.readline()
    assert line.strip() == "started", child.stderr.read()
    time.sleep(wait)
    sent = time.monotonic()
    child.send_signal(signal.SIGINT)
    try:
        out, err = child.communicate(timeout=30)
    except subprocess.TimeoutExpired:
        child.kill()
        child.communicate()
        raise AssertionError("the child went on for 30 s after SIGINT") from None
    words = out.split()
    if len(words) == 2 and words[0] == "KeyboardInterrupt":
        return words[0], err, float(words[1]) - sent, child.returncode
    return out.strip(), err, None, child.returncode


def test_ctrl_c_interrupts_generate(world):
    code = model_code(world) + """
print("started", flush=True)
try:
    model.generate([[1, 2, 3]] * 4, 1_000_000, ignore_eos=True)
except KeyboardInterrupt:
    print("KeyboardInterrupt", time.monotonic())
"""
    out, err, seconds, status = interrupt(code)
    assert status == 0, err
    assert out == "KeyboardInterrupt"
    assert seconds < 1.0


def test_ctrl_c_interrupts_evaluate(tmp_path, world):
    docs = [" ".join(["word"] * 3000)] * 20  # 4,700 windows; tokenized in a few ms
    corpus = tmp_path / "corpus.jsonl"
    corpus.write_text("".join(json.dumps({"text": d}) + "\n" for d in docs))
    code = model_code(world) + f"""
print("started", flush=True)
try:
    model.evaluate("corpus:c={corpus}", progress=False)
except KeyboardInterrupt:
    print("KeyboardInterrupt", time.monotonic())
"""
    out, err, seconds, status = interrupt(code)
    assert status == 0, err
    assert out == "KeyboardInterrupt"
    assert seconds < 1.0


def test_ctrl_c_stops_prepare_leaving_nothing(tmp_path, world):
    corpus = write_corpus(tmp_path / "corpus", documents=4000)
    out_dir = tmp_path / "data"
    code = f"""
import sps, time
print("started", flush=True)
try:
    sps.prepare({str(corpus)!r}, {str(out_dir)!r}, tokenizer={str(world.tokenizer)!r}, threads=1,
                progress=False)
    print("finished")
except KeyboardInterrupt:
    print("KeyboardInterrupt", time.monotonic())
"""
    out, err, seconds, status = interrupt(code, wait=0.05)
    assert status == 0, err
    if out == "finished":
        pytest.skip("prepare finished before the signal on this machine")
    assert out == "KeyboardInterrupt"
    assert not out_dir.exists()

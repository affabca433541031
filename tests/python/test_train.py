"""sps.train runs the trainer of `sps train`: the same checkpoints, metrics handed to on_log
(which can stop the run cleanly), resume, and Ctrl-C."""
import json
import os
import signal
import subprocess
import sys
import time

import pytest

import sps
from conftest import micro_recipe, run_sps


def tensors_and_state(checkpoint):
    return ((checkpoint / "model.safetensors").read_bytes(),
            (checkpoint / "optimizer.safetensors").read_bytes())


def test_the_same_checkpoints_as_sps_train(world, tmp_path):
    recipe = micro_recipe(tmp_path / "r.yaml", world.data, "sps", tmp_path / "cli", steps=12)
    run_sps("train", "--config", recipe)
    records = []
    summary = sps.train(recipe, {"system.out_dir": tmp_path / "py"}, on_log=records.append,
                        progress=False)
    assert summary["finished"] and summary["step"] == 12 and summary["out_dir"] == str(tmp_path / "py")
    assert tensors_and_state(tmp_path / "cli" / "checkpoints" / "final") == \
        tensors_and_state(tmp_path / "py" / "checkpoints" / "final")
    # on_log saw every record of metrics.jsonl, as dicts.
    lines = [json.loads(l) for l in (tmp_path / "py" / "metrics.jsonl").read_text().splitlines()]
    assert records == lines
    assert [r["step"] for r in records if "loss" in r] == list(range(1, 13))


def test_on_log_stops_the_run_and_resume_continues_it(world, tmp_path):
    recipe = micro_recipe(tmp_path / "r.yaml", world.data, "standard", tmp_path / "run", steps=12)
    steps = []

    def stop_at_five(record):
        if "loss" in record:
            steps.append(record["step"])
            return record["step"] < 5

    summary = sps.train(recipe, on_log=stop_at_five, progress=False)
    assert summary["interrupted"] and not summary["finished"] and summary["step"] == 5
    assert steps == [1, 2, 3, 4, 5]
    assert (tmp_path / "run" / "checkpoints" / "latest").is_dir()
    resumed = sps.train(recipe, resume=True, progress=False)
    assert resumed["finished"] and resumed["step"] == 12
    # The interrupted and resumed run ends where an uninterrupted one does.
    straight = sps.train(recipe, {"system.out_dir": tmp_path / "straight"}, progress=False)
    assert straight["step"] == 12
    assert tensors_and_state(tmp_path / "run" / "checkpoints" / "final") == \
        tensors_and_state(tmp_path / "straight" / "checkpoints" / "final")
    # stop_after stops the same way.
    again = sps.train(recipe, {"training.max_tokens": 64 * 20}, resume=True, stop_after=2,
                      progress=False)
    assert again["interrupted"] and again["step"] == 14


def start_and_wait_until(code, ready):
    """Runs `code` in a child interpreter until it has written the file `ready`."""
    child = subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.PIPE,
                             stderr=subprocess.PIPE, env=os.environ)
    deadline = time.monotonic() + 60
    while not ready.exists():
        assert child.poll() is None, child.stderr.read().decode()
        assert time.monotonic() < deadline
        time.sleep(0.01)
    return child


def test_ctrl_c_ends_train_within_a_second_with_a_resumable_checkpoint(world, tmp_path):
    recipe = micro_recipe(tmp_path / "r.yaml", world.data, "sps", tmp_path / "run", steps=20000)
    ready = tmp_path / "ready"
    code = f"""
import sps, pathlib, time
def on_log(record):
    if record.get("step") == 3:
        pathlib.Path({str(ready)!r}).write_text("go")
try:
    sps.train({str(recipe)!r}, on_log=on_log, progress=False)
except KeyboardInterrupt:
    print("KeyboardInterrupt", time.monotonic(), flush=True)
"""
    child = start_and_wait_until(code, ready)
    sent = time.monotonic()
    child.send_signal(signal.SIGINT)
    out, err = child.communicate(timeout=30)
    assert child.returncode == 0, err.decode()
    word, caught = out.decode().split()
    assert word == "KeyboardInterrupt"
    took = float(caught) - sent  # the checkpoint written, before the interpreter's exit
    assert took < 1.0, f"{took:.2f} s after SIGINT"
    latest = tmp_path / "run" / "checkpoints" / "latest"
    state = json.loads((latest / "trainer_state.json").read_text())
    assert state["step"] >= 3
    resumed = sps.train(recipe, resume=True, stop_after=2, progress=False)
    assert resumed["interrupted"] and resumed["step"] == state["step"] + 2


def test_ctrl_c_on_the_main_thread_leaves_a_train_on_another_thread_running(world, tmp_path):
    """Signals are Python's main thread's: there a KeyboardInterrupt; a run on a worker thread
    goes on to its end, and Ctrl-C works as before once it is done."""
    recipe = micro_recipe(tmp_path / "r.yaml", world.data, "sps", tmp_path / "run", steps=12)
    ready = tmp_path / "ready"
    code = f"""
import pathlib, signal, sps, threading, time
def on_log(record):
    if record.get("step") == 2:
        pathlib.Path({str(ready)!r}).write_text("go")
        time.sleep(0.5)  # the signal arrives while the run is going
result, done = {{}}, threading.Event()
def run():
    try:
        result.update(sps.train({str(recipe)!r}, on_log=on_log, progress=False))
    except BaseException as e:
        print("worker:", repr(e), flush=True)
    done.set()
threading.Thread(target=run).start()
try:
    done.wait(60)
    print("no KeyboardInterrupt")
except KeyboardInterrupt:
    done.wait(60)  # (Thread.join may return early once interrupted)
    print("KeyboardInterrupt", result.get("finished"), result.get("interrupted"), flush=True)
try:
    signal.raise_signal(signal.SIGINT)
    time.sleep(1)
except KeyboardInterrupt:
    print("again", flush=True)
"""
    child = start_and_wait_until(code, ready)
    child.send_signal(signal.SIGINT)
    out, err = child.communicate(timeout=60)
    assert child.returncode == 0, out.decode() + err.decode()
    assert out.decode().split() == ["KeyboardInterrupt", "True", "False", "again"], err.decode()


def test_a_second_writer_of_a_run_folder_is_refused(world, tmp_path):
    """The run folder's lock holds for the module as for the command: a second train into a
    folder a train is writing stops at once, naming the folder and the holder."""
    recipe = micro_recipe(tmp_path / "r.yaml", world.data, "sps", tmp_path / "run", steps=8)
    refused = []

    def on_log(record):
        if record.get("step") == 1 and not refused:
            with pytest.raises(sps.InputError) as second:
                sps.train(recipe, progress=False)
            refused.append(str(second.value))
            return False

    first = sps.train(recipe, on_log=on_log, progress=False)
    assert first["interrupted"] and first["step"] == 1
    assert len(refused) == 1 and "in use by another sps process" in refused[0], refused
    assert str(tmp_path / "run") in refused[0], refused
    assert sps.train(recipe, resume=True, progress=False)["finished"]  # the lock went with it

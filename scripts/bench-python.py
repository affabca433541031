"""The Python module against the command, on the same model, flags and threads
(docs/performance.md, "Python module"). Prints numbers; asserts nothing about time.

  generate   decode tokens/s of `sps generate --stats` and of Model.generate (the engine's own
             clock in both) and of Model.stream (wall clock over the Python loop), N new tokens
  logits     Model.logits of [B, T] against `sps bench step --forward-only` (median seconds)
  score      the time of one Model.loglikelihood call with a one-token continuation, and of the
             logits of the same tokens: the per-call overhead

Runs alternate between the command and Python (--repeats each), so drift of a shared machine
hits both alike. Usage (from the repository root, after make build):

  PYTHONPATH=build/release/python python3 scripts/bench-python.py [--threads 2] [--repeats 5]
"""
import argparse
import base64
import json
import os
import re
import statistics
import struct
import subprocess
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
# configs/models/tiny.yaml's shape; generation over a byte-level tokenizer (V = 320) so that
# the command has a tokenizer without any files to fetch.
TINY = {"n_layer": 4, "n_head": 4, "hidden_size": 256, "intermediate_size": 768,
        "block_size": 256, "window_size": 64}
BYTES = {"vocab_size": 320, "eos_token_id": 256, "predict_token_id": 257, "pad_token_id": 319}


def random_state(config, seed):
    rng = np.random.default_rng(seed)
    state = {}
    for name, shape, _ in sps._sps.param_table(json.dumps(config)):
        if name.endswith("norm.weight"):
            state[name] = np.ones(shape, np.float32)
        else:
            state[name] = (rng.standard_normal(shape) * 0.02).astype(np.float32)
    return state


def write_checkpoint(folder: Path, config, state, tokenizer: Path):
    """A checkpoint folder the command loads: safetensors (F32, little-endian) + config.yaml."""
    folder.mkdir(parents=True, exist_ok=True)
    header, offset, blobs = {}, 0, []
    for name, array in state.items():
        data = np.ascontiguousarray(array, "<f4").tobytes()
        header[name] = {"dtype": "F32", "shape": list(array.shape),
                        "data_offsets": [offset, offset + len(data)]}
        offset += len(data)
        blobs.append(data)
    text = json.dumps(header).encode()
    text += b" " * (-len(text) % 8)
    with open(folder / "model.safetensors", "wb") as f:
        f.write(struct.pack("<Q", len(text)) + text)
        for blob in blobs:
            f.write(blob)
    lines = [f"tokenizer: {tokenizer}", "model:"] + [f"  {k}: {v}" for k, v in config.items()]
    (folder / "config.yaml").write_text("\n".join(lines) + "\n")


def sps_command(*args, threads):
    """Runs the binary; returns its stdout and stderr."""
    env = dict(os.environ, OMP_NUM_THREADS=str(threads), OMP_WAIT_POLICY="passive")
    result = subprocess.run([str(ROOT / "build" / "release" / "sps"), *map(str, args)],
                            capture_output=True, text=True, env=env)
    if result.returncode:
        raise RuntimeError(f"sps {' '.join(map(str, args))}: {result.stderr}")
    return result.stdout, result.stderr


def child_cpu_seconds(*args, threads):
    """CPU seconds (user + system) of one run of the binary."""
    env = dict(os.environ, OMP_NUM_THREADS=str(threads), OMP_WAIT_POLICY="passive")
    child = subprocess.Popen([str(ROOT / "build" / "release" / "sps"), *map(str, args)],
                             stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, env=env)
    _, status, usage = os.wait4(child.pid, 0)
    if status:
        raise RuntimeError(f"sps {' '.join(map(str, args))}: {child.stderr.read().decode()}")
    return usage.ru_utime + usage.ru_stime


def python_cpu_seconds(call):
    t0 = time.process_time()
    call()
    return time.process_time() - t0


def bench_generate(work: Path, family: str, args):
    config = dict(TINY, **BYTES, family=family)
    tokenizer = work / "bytes.tiktoken"
    checkpoint = work / family
    write_checkpoint(checkpoint, config, random_state(config, 1), tokenizer)
    rng = np.random.default_rng(2)
    prompts = ["".join(chr(c) for c in rng.integers(97, 123, args.prompt)) for _ in range(args.batch)]
    batch_file = work / "prompts.jsonl"
    batch_file.write_text("".join(json.dumps({"prompt": p}) + "\n" for p in prompts))
    model = sps.load(checkpoint)
    flags = dict(ignore_eos=True)
    command = ["generate", "--checkpoint", checkpoint, "--batch-file", batch_file, "--batch-size",
               args.batch, "--ignore-eos", "--output", work / "out.jsonl"]
    cli, engine, stream, cli_cpu, python_cpu = [], [], [], [], []
    for _ in range(args.repeats):
        _, err = sps_command(*command, "--max-new-tokens", args.new, "--stats", threads=args.threads)
        cli.append(float(re.search(r"decode ([0-9.]+) tokens/s", err).group(1)))
        want = [json.loads(l)["completion"] for l in (work / "out.jsonl").read_text().splitlines()]
        got = model.generate(prompts, args.new, **flags)
        assert [g.text for g in got] == want, "Python and the command generated different text"
        engine.append(model.last_generation_stats["decode_tokens_per_second"])
        first, count = None, 0
        for _event in model.stream(prompts, args.new, **flags):
            if first is None:
                first = time.perf_counter()  # after the prefill and the first choice
            count += 1
        stream.append((count - args.batch) / (time.perf_counter() - first))
        # CPU time per generated token: runs of N and of 1 new token, the difference.
        steps = (args.new - 1) * args.batch
        cli_cpu.append((child_cpu_seconds(*command, "--max-new-tokens", args.new, threads=args.threads)
                        - child_cpu_seconds(*command, "--max-new-tokens", 1, threads=args.threads)) / steps)
        python_cpu.append((python_cpu_seconds(lambda: model.generate(prompts, args.new, **flags))
                           - python_cpu_seconds(lambda: model.generate(prompts, 1, **flags))) / steps)
    c, e, s, cc, pc = map(statistics.median, (cli, engine, stream, cli_cpu, python_cpu))
    print(f"generate {family}: B={args.batch} P={args.prompt} N={args.new}, {args.threads} threads, "
          f"{args.repeats} alternating runs (medians):\n"
          f"  decode tok/s: sps generate {c:.1f}, Model.generate {e:.1f} ({e / c:.3f}x), "
          f"Model.stream {s:.1f} ({s / c:.3f}x)\n"
          f"  CPU us per decoded token: sps generate {1e6 * cc:.0f}, Model.generate {1e6 * pc:.0f} "
          f"({pc / cc:.3f}x)\n"
          f"  runs: {[round(x) for x in cli]} / {[round(x) for x in engine]} / "
          f"{[round(x) for x in stream]}; CPU {[round(1e6 * x) for x in cli_cpu]} / "
          f"{[round(1e6 * x) for x in python_cpu]}")


def bench_logits(args):
    config = dict(TINY, family=args.family, vocab_size=8256, eos_token_id=8191,
                  predict_token_id=8192, pad_token_id=8255)
    model = sps.from_state_dict(random_state(config, 3), config)
    B = args.logits_batch
    tokens = np.random.default_rng(4).integers(0, 8191, size=(B, 256))
    rows = np.concatenate([tokens, tokens[:, :1]], 1)  # the same forward, as NLL targets
    model.logits(tokens)  # warm-up: plans, pages
    bench = ["bench", "step", "--config", ROOT / "configs/models/tiny.yaml",
             f"model.family={args.family}", "--batch", B, "--tokens", 256, "--forward-only",
             "--warmup", 1, "--json"]
    wall = {"bench": [], "logits": [], "nll": []}
    cpu = {"bench": [], "logits": [], "nll": []}
    for _ in range(args.repeats):
        out, _ = sps_command(*bench, "--steps", 5, threads=args.threads)
        wall["bench"].append(json.loads(out)["step_seconds"])
        # CPU seconds per forward: runs of 6 and of 1 timed forwards, the difference / 5 (the
        # command's own set-up and sgemm measurement cancel).
        cpu["bench"].append((child_cpu_seconds(*bench, "--steps", 6, threads=args.threads) -
                             child_cpu_seconds(*bench, "--steps", 1, threads=args.threads)) / 5)
        for name, call in (("logits", lambda: model.logits(tokens)), ("nll", lambda: model.nll(rows))):
            times, cpus = [], []
            for _ in range(3):
                t0, c0 = time.perf_counter(), time.process_time()
                result = call()
                times.append(time.perf_counter() - t0)
                cpus.append(time.process_time() - c0)
                del result
            wall[name].append(statistics.median(times))
            cpu[name].append(statistics.median(cpus))
    w = {k: statistics.median(v) for k, v in wall.items()}
    c = {k: statistics.median(v) for k, v in cpu.items()}
    print(f"logits {args.family}: [{B}, 256], V=8256 (tiny), {args.threads} threads, "
          f"{args.repeats} alternating runs (medians):\n"
          f"  wall ms: sps bench step --forward-only {1e3 * w['bench']:.1f}, Model.logits "
          f"{1e3 * w['logits']:.1f} ({w['logits'] / w['bench']:.3f}x), Model.nll (no logits out) "
          f"{1e3 * w['nll']:.1f} ({w['nll'] / w['bench']:.3f}x)\n"
          f"  CPU ms:  sps bench step --forward-only {1e3 * c['bench']:.1f}, Model.logits "
          f"{1e3 * c['logits']:.1f} ({c['logits'] / c['bench']:.3f}x), Model.nll "
          f"{1e3 * c['nll']:.1f} ({c['nll'] / c['bench']:.3f}x)\n"
          f"  runs, wall ms: {[round(1e3 * x) for x in wall['bench']]} / "
          f"{[round(1e3 * x) for x in wall['logits']]} / {[round(1e3 * x) for x in wall['nll']]}")


def bench_score(work: Path, args):
    config = dict(TINY, **BYTES, family=args.family)
    model = sps.from_state_dict(random_state(config, 5), config,
                                tokenizer=work / "bytes.tiktoken")
    for context_length in (8, 64, 255):
        context = list(range(40, 40 + context_length))
        calls, forwards = [], []
        for _ in range(200):
            t0 = time.perf_counter()
            model.loglikelihood(context, [97])
            t1 = time.perf_counter()
            model.logits(context + [97])
            t2 = time.perf_counter()
            calls.append(t1 - t0)
            forwards.append(t2 - t1)
        c, f = statistics.median(calls), statistics.median(forwards)
        print(f"loglikelihood {args.family}, context {context_length} + 1 token, "
              f"{args.threads} threads: {1e6 * c:.0f} us per call; Model.logits of the same "
              f"{context_length + 1} tokens {1e6 * f:.0f} us")


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--threads", type=int, default=2)
    p.add_argument("--repeats", type=int, default=5)
    p.add_argument("--batch", type=int, default=4, help="generate: prompts")
    p.add_argument("--prompt", type=int, default=64, help="generate: prompt bytes (= tokens)")
    p.add_argument("--new", type=int, default=128, help="generate: new tokens")
    p.add_argument("--logits-batch", type=int, default=8)
    p.add_argument("--family", default="sps", help="logits and score")
    p.add_argument("--only", choices=["generate", "logits", "score"])
    args = p.parse_args()
    # OpenMP reads its settings when it is loaded (by numpy's BLAS or by the module): this
    # process gets what the command's runs get (a passive wait, as the test suite uses).
    os.environ["OMP_NUM_THREADS"] = str(args.threads)
    os.environ["OMP_WAIT_POLICY"] = "passive"
    global np, sps
    import numpy as np
    import sps
    with tempfile.TemporaryDirectory() as tmp:
        work = Path(tmp)
        (work / "bytes.tiktoken").write_text(  # a tiktoken rank file of the 256 bytes
            "".join(f"{base64.b64encode(bytes([b])).decode()} {b}\n" for b in range(256)))
        if args.only in (None, "generate"):
            for family in ("standard", "sps"):
                bench_generate(work, family, args)
        if args.only in (None, "logits"):
            bench_logits(args)
        if args.only in (None, "score"):
            bench_score(work, args)


if __name__ == "__main__":
    main()

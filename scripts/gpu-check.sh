#!/usr/bin/env bash
# The GPU check of docs/gpu.md: on a machine with an NVIDIA GPU, build (or take a prepared
# bundle), then run everything that needs a GPU and write one JSON report.
#
#   scripts/gpu-check.sh [--bundle FILE.tar.gz] [--report FILE.json] [--logs DIR]
#                        [--only STAGE[,STAGE…]]
#
# Without --bundle it builds build/gpu with -DSPS_CUDA=ON (the dependencies of
# scripts/install-deps.sh must be installed). A bundle made by scripts/gpu-bundle.sh carries
# the binaries and their libraries instead, for a GPU machine without them.
# Stages, in order: gpu, build, version, sass, kernels, train, eval, processes,
# device-errors, bench-attention, bench-step, bench-generate, sanitizer (last: the slowest,
# and the one most likely to run out of time). Each has a time limit, and the report is
# rewritten after each, so a run cut short still says what it found. What the CUDA backend
# does not have yet is listed in the report as "not built", so that it says what was not
# checked. A stage that cannot run here (no mpirun) is "skipped". Each stage's output is kept
# in --logs (default build/gpu-check-logs): eval, processes and device-errors use the train
# stage's runs there, so `--only eval` works after a run that trained. The stages but the
# sanitizer take about 5 minutes on an H200 (an estimate); run the sanitizer as a second call
# (--only sanitizer) when the device time allows. Exit status 0 when no stage failed,
# 1 otherwise, 2 on bad arguments.
set -uo pipefail
cd "$(dirname "$0")/.."

bundle="" report="gpu-check.json" only="" logs=build/gpu-check-logs
while [ $# -gt 0 ]; do
  case $1 in
    --bundle) bundle=$2; shift 2 ;;
    --report) report=$2; shift 2 ;;
    --logs) logs=$2; shift 2 ;;
    --only) only=",$2,"; shift 2 ;;
    *) echo "gpu-check.sh: unknown argument '$1' (expected --bundle, --report, --logs or --only)" >&2; exit 2 ;;
  esac
done
[ -z "$bundle" ] || [ -f "$bundle" ] || { echo "gpu-check.sh: --bundle $bundle: no such file" >&2; exit 2; }
mkdir -p "$logs" && logs=$(realpath "$logs")

# cuBLASLt and NCCL are opened at run time from the library path: the toolkit's folder, or
# where the machine's image keeps them (a Python wheel's nvidia/*/lib, say).
toolkit_libs="${CUDA_HOME:-/usr/local/cuda}/lib64"
for lib in libcublasLt.so.13 libnccl.so.2; do
  found=$(find "${CUDA_HOME:-/usr/local/cuda}/lib64" /usr/local /opt /usr/lib -name "$lib" \
    -print -quit 2>/dev/null)
  [ -z "$found" ] || toolkit_libs="$toolkit_libs:$(dirname "$found")"
done
export LD_LIBRARY_PATH="$toolkit_libs${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
results=()  # one JSON object per stage
failed=0
bin=build/gpu
export bin logs bundle  # the stages run in their own shells (below)

not_built='["bf16 activations and K/V", "wgmma kernels", "sampling without top-k on the GPU", "sps generate and sps serve on the GPU end to end (their decoder is in the kernels stage; a model with a tokenizer is not in the bundle)", "analyze on the GPU"]'

# The report as it stands, rewritten after every stage: a run cut short still leaves one.
write_report() {
  {
    printf '{"date": "%s", "revision": "%s", "host": "%s",\n "not_built": %s,\n "stages": [\n' \
      "$(date -u +%FT%TZ)" "$(git rev-parse --short=12 HEAD 2>/dev/null || echo unknown)" \
      "$(uname -m)" "$not_built"
    for i in "${!results[@]}"; do
      [ "$i" = 0 ] || printf ',\n'
      printf '  %s' "${results[$i]}"
    done
    printf '\n]}\n'
  } >"$report"
}

# run_stage NAME SECONDS FUNCTION: runs the stage (unless --only names another) in its own
# shell, stopped after SECONDS so that one stuck stage cannot take the others' time; records
# passed, failed, skipped (status 77) or timed out, the seconds and the end of its output.
run_stage() {
  local name=$1 limit=$2 function=$3
  [ -z "$only" ] || [[ $only == *",$name,"* ]] || [ "$name" = build ] || return 0
  local start=$SECONDS status rc=0
  timeout --kill-after=10 "$limit" bash -uo pipefail -c "$function" >"$logs/$name.log" 2>&1 ||
    rc=$?
  case $rc in
    0) status=passed ;;
    77) status=skipped ;;
    124 | 137) status="timed out after ${limit}s" ;;
    *) status=failed ;;
  esac
  [ "$status" = passed ] || [ "$status" = skipped ] || failed=1
  printf '%-14s %s (%ds)\n' "$name" "$status" $((SECONDS - start))
  [ "$status" = passed ] || tail -5 "$logs/$name.log" | sed 's/^/    /'
  results+=("$(python3 -c 'import json,sys; print(json.dumps({"stage": sys.argv[1], "status": sys.argv[2], "seconds": int(sys.argv[3]), "output_tail": open(sys.argv[4], errors="replace").read()[-4000:]}))' \
    "$name" "$status" $((SECONDS - start)) "$logs/$name.log")")
  write_report
}

stage_gpu() {
  nvidia-smi --query-gpu=index,name,memory.total,driver_version,compute_cap --format=csv,noheader
}

# With a bundle, $bin/sps and $bin/test_cuda are scripts that run the bundle's binaries
# (in $bin/bundle) with its libraries first on their library path, and on nothing else's:
# the machine's own tools keep the machine's libraries.
stage_build() {
  if [ -n "$bundle" ]; then
    rm -rf "$bin" && mkdir -p "$bin/bundle" && tar -x -z -C "$bin/bundle" -f "$bundle" || return 1
    local b
    for b in sps test_cuda; do
      printf '#!/bin/sh\nhere=$(dirname "$(readlink -f "$0")")\nLD_LIBRARY_PATH="$here/bundle/lib:$LD_LIBRARY_PATH" exec "$here/bundle/%s" "$@"\n' \
        "$b" >"$bin/$b" && chmod +x "$bin/$b" || return 1
    done
    echo "libraries from the bundle; cuBLASLt and NCCL searched on $LD_LIBRARY_PATH"
  else
    cmake -S . -B "$bin" -G Ninja -DCMAKE_BUILD_TYPE=Release -DSPS_CUDA=ON &&
      ninja -C "$bin" sps test_cuda
  fi
  "$bin/sps" --version >/dev/null  # the binary runs here (its libraries are found)
}

# The binary sees the GPU and says so.
stage_version() {
  local text
  text=$("$bin/sps" --version) && echo "$text" && grep -q '; cuda:0 ' <<<"$text"
}

# Hopper code is in the binary as sm_90a machine code, and no kernel uses local memory.
stage_sass() {
  command -v cuobjdump >/dev/null || { echo "cuobjdump not found"; return 1; }
  local elf=$bin/sps
  [ ! -f "$bin/bundle/sps" ] || elf=$bin/bundle/sps
  cuobjdump --list-elf "$elf" | tee /dev/stderr | grep -q sm_90a &&
    ! cuobjdump --dump-sass "$elf" | grep -E '\b(LDL|STL)\b'
}

# Every CUDA test runs (none skipped: a skip here means the GPU was not seen) and passes.
# The golden cases the CUDA tests run: the bundle's copy, or ../shared beside this tree.
use_golden() {
  if [ -d "$bin/bundle/golden" ]; then
    export SPS_GOLDEN_DIR=$PWD/$bin/bundle/golden
  elif [ -d ../shared/golden ]; then
    export SPS_GOLDEN_DIR=$(realpath ../shared/golden)
  fi
}

# A test that fails is run again with every launch synchronous, so that an error names the
# kernel that caused it rather than the next copy.
stage_kernels() {
  use_golden
  "$bin/test_cuda" --gtest_brief=0 | tee "$logs/kernels.out" &&
    ! grep -q '\[  SKIPPED \]' "$logs/kernels.out" && return 0
  local failing
  failing=$(sed -n 's/^\[  FAILED  \] \([A-Za-z0-9_.]*\) .*/\1/p' "$logs/kernels.out" | sort -u | paste -sd:)
  [ -z "$failing" ] || CUDA_LAUNCH_BLOCKING=1 "$bin/test_cuda" --gtest_filter="$failing" | tail -40
  return 1
}

# memcheck over every CUDA test but the one that asks for 1 PiB on purpose (an API error it
# would report) and NCCL's (its own kernels); racecheck over the kernels' own tests.
stage_sanitizer() {
  command -v compute-sanitizer >/dev/null || { echo "compute-sanitizer not found"; return 1; }
  use_golden
  compute-sanitizer --tool memcheck --error-exitcode 1 "$bin/test_cuda" \
    --gtest_filter='-CudaMemory.AnAllocationTooLargeIsOneLine:NcclAllReduce.*' &&
    compute-sanitizer --tool racecheck --error-exitcode 1 "$bin/test_cuda" \
      --gtest_filter='CudaAttention.*:CudaOps.*'
}

# sps train on the GPU follows the CPU: the same micro recipe on random tokens, 48 steps on
# each device, every step's loss and the validation NLL within 1e-3 (relative); on bf16 GEMM
# operands (system.precision=bf16) within 3e-2, and not equal to fp32's.
stage_train() {
  local dir=$logs/train
  rm -rf "$dir" && mkdir -p "$dir/data"
  python3 - "$dir/data" <<'PY' || return 1
import random, struct, sys
random.seed(1)
for name, n in (("train.bin", 20000), ("val.bin", 2000)):
    with open(f"{sys.argv[1]}/{name}", "wb") as f:
        f.write(struct.pack(f"<{n}H", *(60 if random.random() < 1 / 16 else random.randrange(60) for _ in range(n))))
PY
  cat >"$dir/recipe.yaml" <<YAML
model: {family: sps, n_layer: 2, n_head: 2, hidden_size: 64, intermediate_size: 96, vocab_size: 64,
        block_size: 32, window_size: 4, eos_token_id: 60, predict_token_id: 61, pad_token_id: 63}
training: {micro_batch_size: 4, global_batch_size: 8, max_tokens: 12288, eval_total_tokens: 512,
           eval_interval_tokens: 4096, log_interval: 1, save_every: 1048576,
           rolling_save_every: 1048576, chunk_size_units: 4}
optimizer: {learning_rate: 0.01}
scheduler: {warmup_tokens: 1024, lr_decay_tokens: 4096, min_lr: 0.001}
data: {dataset: $dir/data}
YAML
  local device
  for device in cpu cuda:0; do
    "$bin/sps" train --config "$dir/recipe.yaml" --device $device system.out_dir="$dir/$device" \
      | tail -2 || return 1
  done
  "$bin/sps" train --config "$dir/recipe.yaml" --device cuda:0 system.precision=bf16 \
    system.out_dir="$dir/cuda-bf16" | tail -2 || return 1
  echo -n "fp32: " && compare_runs "$dir/cpu" "$dir/cuda:0" 0 1e-3 &&
    echo -n "bf16: " && compare_runs "$dir/cpu" "$dir/cuda-bf16" 1e-6 3e-2
}

# compare_runs REFERENCE RUN LOW HIGH: passes when the largest relative difference between
# the two run folders' losses and validation NLLs (48 steps and more) lies in [LOW, HIGH).
compare_runs() {
  python3 - "$1/metrics.jsonl" "$2/metrics.jsonl" "$3" "$4" <<'PY'
import json, sys
def read(path):
    lines = [json.loads(l) for l in open(path)]
    return [l["loss"] for l in lines if "loss" in l] + [l["val_nll"] for l in lines if "val_nll" in l]
reference, run = read(sys.argv[1]), read(sys.argv[2])
low, high = float(sys.argv[3]), float(sys.argv[4])
assert len(reference) == len(run) > 48
worst = max(abs(a - b) / abs(b) for a, b in zip(run, reference))
print(f"final val NLL {reference[-1]:.6f} and {run[-1]:.6f}, worst relative difference {worst:.2e}")
sys.exit(0 if low <= worst < high else 1)
PY
}

# Two processes under mpirun, each on the GPU of its local rank (both on GPU 0 where there is
# one), gradients all-reduced by MPI through host copies: within 1e-3 of two CPU processes.
# Skipped where mpirun is not installed.
stage_processes() {
  command -v mpirun >/dev/null || { echo "mpirun is not installed here"; return 77; }
  local dir=$logs/train device=cuda
  [ -f "$dir/recipe.yaml" ] || { echo "no recipe: the train stage did not run"; return 1; }
  [ "$(nvidia-smi -L | wc -l)" -ge 2 ] || device=cuda:0
  local mpi="mpirun --allow-run-as-root --oversubscribe --bind-to none -np 2"
  OMP_NUM_THREADS=1 $mpi "$bin/sps" train --config "$dir/recipe.yaml" --device cpu \
    system.out_dir="$dir/mpi-cpu" | tail -2 || return 1
  $mpi "$bin/sps" train --config "$dir/recipe.yaml" --device $device \
    system.out_dir="$dir/mpi-$device" | tail -2 || return 1
  compare_runs "$dir/mpi-cpu" "$dir/mpi-$device" 0 1e-3
}

# sps eval on the GPU follows the CPU: the train stage's checkpoint scored on its
# validation file on each device, the NLL within 1e-5 (relative).
stage_eval() {
  local dir=$logs/train device
  [ -d "$dir/cpu/checkpoints" ] || { echo "no checkpoint: the train stage did not run"; return 1; }
  for device in cpu cuda:0; do
    "$bin/sps" eval --checkpoint "$dir/cpu" --tasks "val:$dir/data/val.bin" --device $device \
      --quiet --out "$dir/eval-$device.json" >/dev/null || return 1
  done
  python3 - "$dir/eval-cpu.json" "$dir/eval-cuda:0.json" <<'PY'
import json, sys
cpu, gpu = (json.load(open(p))["val"]["nll"] for p in sys.argv[1:])
print(f"val NLL cpu {cpu:.8f} cuda {gpu:.8f}, relative difference {abs(cpu - gpu) / cpu:.2e}")
sys.exit(0 if abs(cpu - gpu) <= 1e-5 * cpu else 1)
PY
}

# With a GPU present, a command still refuses what the backend cannot do, in one line.
stage_device_errors() {
  local err rc=0
  err=$("$bin/sps" bench attention --device cuda:64 2>&1) || rc=$?
  echo "$err"
  [ $rc -eq 2 ] && [[ $err == "sps: --device: cuda:64 asked for, but this machine has "* ]] || return 1
  rc=0
  err=$("$bin/sps" analyze gradients --checkpoint "$logs/train/cpu" --out "$logs/gradients.json" \
    --device cuda:0 2>&1) || rc=$?
  echo "$err"
  [ $rc -eq 2 ] && [[ $err == *"the CUDA backend does not run"* ]]
}

# The attention alone at the paper's shape (T = 4096, w = 64, 12 heads of 64), fp32 and bf16:
# the blocked kernels for standard and sps, and sps on the reference kernels. Prints numbers;
# passes when it runs.
stage_bench_attention() {
  local precision
  for precision in fp32 bf16; do
    "$bin/sps" bench attention --device cuda:0 --precision $precision --tokens 4096 \
      --window 64 --heads 12 --head-dim 64 --repeats 5 || return 1
  done
}

# A training step of scale s at the paper's T = 4096 (micro-batch 4), standard and sps w64,
# bf16 and fp32: step time, tokens/s and model FLOP/s against the GPU's own GEMM rate
# measured beside it. Prints numbers; passes when it runs.
stage_bench_step() {
  local precision family
  for precision in bf16 fp32; do
    for family in standard sps; do
      "$bin/sps" bench step --config configs/models/s.yaml model.family=$family \
        model.window_size=64 --device cuda:0 --precision $precision --batch 4 --json || return 1
    done
  done
}

# Decode by the paper's protocol (P = 1024, N = 3072, B = 16) for standard and sps w64 of
# scale s, alternated step by step: tokens/s, KV bytes, and decode against the GPU's copy
# bandwidth and GEMM rate measured beside it. Prints numbers; passes when it runs.
stage_bench_generate() {
  "$bin/sps" bench generate model.window_size=64 --config configs/models/s.yaml \
    --families standard,sps --paper --interleave --warmup 0 --runs 1 --device cuda:0
}

export -f compare_runs use_golden $(declare -F | awk '$3 ~ /^stage_/ {print $3}')
# Stage limits: a few times the expected seconds (a source build aside), so that one stuck
# stage leaves the others time; the report says which stages a cut-short run reached.
run_stage gpu 30 stage_gpu
run_stage build 1800 stage_build
if [ $failed = 0 ]; then
  run_stage version 30 stage_version
  run_stage sass 60 stage_sass
  run_stage kernels 180 stage_kernels
  run_stage train 150 stage_train
  run_stage eval 40 stage_eval
  run_stage processes 120 stage_processes
  run_stage device-errors 30 stage_device_errors
  run_stage bench-attention 60 stage_bench_attention
  run_stage bench-step 120 stage_bench_step
  run_stage bench-generate 120 stage_bench_generate
  run_stage sanitizer 300 stage_sanitizer
fi
write_report
echo "report: $report"
exit $failed

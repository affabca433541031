#!/usr/bin/env bash
# The GPU check of docs/gpu.md: on a machine with an NVIDIA GPU, take a prepared bundle (or
# build), run everything that needs a GPU, and leave two files in --out: gpu-check.json (the
# report) and logs.tgz (every stage's output and the small files of its runs; no checkpoints
# or token files).
#
#   scripts/gpu-check.sh [--bundle FILE.tar.gz] [--out DIR] [--work DIR] [--only STAGE[,STAGE…]]
#                        [--budget SECONDS] [--dry-run]
#
# --bundle  binaries and libraries packed by scripts/gpu-bundle.sh; without it, build/gpu is
#           built with -DSPS_CUDA=ON (the dependencies of scripts/install-deps.sh needed).
# --out     where the report and logs.tgz go (default build/gpu-check), both rewritten after
#           every stage, so a run cut short still says what passed.
# --work    scratch folder (default build/gpu-check-work): the unpacked bundle (bin/) and the
#           stages' output and runs (logs/, what logs.tgz packs); eval, processes and
#           device-errors use the train stage's runs there, so `--only eval` works after a run
#           that trained.
# --budget  seconds from the start within which everything must end (default 580 with a
#           bundle, none without): a stage starts only with its minimum before that end, and
#           its limit is cut to what is left.
# --dry-run every stage on the CPU with small shapes, fp32 and bf16: checks the plan (command
#           lines, report, logs.tgz) on a machine without a GPU. nvidia-smi, cuobjdump and
#           compute-sanitizer are taken from PATH as on a GPU machine (a test puts fakes there).
#
# Stages, cheap and decisive first: gpu, build, version, kernels, golden, model, train, eval,
# processes, device-errors, sass, bench-attention, bench-step, bench-generate (the first pass:
# about 4 minutes on an H200, an estimate; its limits add up to 505 s), then the sanitizers
# racecheck and memcheck, which take what time is left. Status 0 when no stage failed, 1
# otherwise, 2 on bad arguments.
set -uo pipefail
cd "$(dirname "$0")/.."
start=$SECONDS  # the budget counts from here: the library search below takes time too

bundle="" out=build/gpu-check work=build/gpu-check-work only="" budget="" dry_run=0
while [ $# -gt 0 ]; do
  case $1 in
    --bundle | --out | --work | --only | --budget)
      [ $# -ge 2 ] || { echo "gpu-check.sh: $1 needs a value" >&2; exit 2; }
      case $1 in
        --bundle) bundle=$2 ;;
        --out) out=$2 ;;
        --work) work=$2 ;;
        --only) only=",$2," ;;
        --budget) budget=$2 ;;
      esac
      shift 2 ;;
    --dry-run) dry_run=1; shift ;;
    *) echo "gpu-check.sh: unknown argument '$1' (expected --bundle, --out, --work, --only, --budget or --dry-run)" >&2
       exit 2 ;;
  esac
done
[ -z "$bundle" ] || [ -f "$bundle" ] || { echo "gpu-check.sh: --bundle $bundle: no such file" >&2; exit 2; }
[ -n "$budget" ] || budget=$([ -n "$bundle" ] && echo 580 || echo 0)
[[ $budget =~ ^[0-9]+$ ]] || { echo "gpu-check.sh: --budget must be whole seconds, got '$budget'" >&2; exit 2; }
[ -z "$bundle" ] || bundle=$(realpath "$bundle")
mkdir -p "$out" "$work/logs" && out=$(realpath "$out") && work=$(realpath "$work") || exit 2
logs=$work/logs
# A run of every stage starts from empty logs; a run of some (--only) keeps the others' runs.
[ -n "$only" ] || { rm -rf "$logs" && mkdir "$logs"; } || exit 2

# cuBLASLt and NCCL are opened at run time from the library path: the toolkit's folder, or
# where the machine's image keeps them (a Python wheel's nvidia/*/lib, say).
toolkit_libs="${CUDA_HOME:-/usr/local/cuda}/lib64"
for lib in libcublasLt.so.13 libnccl.so.2; do
  found=$(find "${CUDA_HOME:-/usr/local/cuda}/lib64" /usr/local /opt /usr/lib -name "$lib" \
    -print -quit 2>/dev/null)
  [ -z "$found" ] || toolkit_libs="$toolkit_libs:$(dirname "$found")"
done
export LD_LIBRARY_PATH="$toolkit_libs${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"

# What the stages run on, and at which sizes: a GPU at the paper's shapes, or (--dry-run) the
# CPU at small ones. Plain words, split where used (the stages run in shells of their own).
bin=build/gpu  # a source build; a bundle is unpacked into $work/bin
[ -z "$bundle" ] || bin=$work/bin
if [ $dry_run = 1 ]; then
  # The CPU's attention is fp32 only (sps bench attention refuses bf16 there).
  device=cpu precisions="fp32 bf16" attention_precisions=fp32 train_steps=4
  attention_shape="--tokens 96 --window 8 --heads 2 --head-dim 16 --repeats 1"
  gemm_shape="--size 128 --repeats 1"
  step_shape="--config configs/models/micro.yaml --batch 1 --warmup 1 --steps 2"
  generate_shape="--config configs/models/micro.yaml --prompt-tokens 8 --new-tokens 4 --batch 2"
else
  device=cuda:0 precisions="fp32 bf16" attention_precisions="fp32 bf16" train_steps=48
  attention_shape="--tokens 4096 --window 64 --heads 12 --head-dim 64 --repeats 3"
  gemm_shape="--size 8192 --repeats 5"
  step_shape="--config configs/models/s.yaml --batch 4 --warmup 1 --steps 2"
  generate_shape="--config configs/models/s.yaml --prompt-tokens 1024 --new-tokens 256 --batch 16"
fi
# racecheck: the attention kernels' and top-k's small cases (racecheck slows kernels a
# hundredfold); memcheck: the small, fast tests that reach every kernel (those cases, the
# memory ops and row copies, the GEMMs and their bf16 roundings, the pointwise ops), not the
# golden cases, whole models, the attention's sweeps over every mask or NCCL.
race_filter='*SmallShapes*'
memcheck_filter='*SmallShapes*:CudaMemory.*:CudaBackend.*:CudaLinear.*:CudaOps.*'
export bin logs bundle device precisions attention_precisions train_steps attention_shape gemm_shape step_shape generate_shape \
  race_filter memcheck_filter

not_built='["bf16 activations and K/V", "wgmma kernels", "sampling without top-k on the GPU (docs/gpu.md says why)", "sps generate and sps serve on the GPU end to end (their decoder is in the model stage; a model with a tokenizer is not in the bundle)", "analyze on the GPU"]'
results=$logs/stage-results.jsonl  # one JSON object per stage run, in order
: >"$results"
planned=()
failed=0
revision=unknown  # the binaries' (binaries_revision), once the build stage has them
reserve=15  # seconds kept for the last report and logs.tgz (a stage's kill takes up to 5)

# The report and logs.tgz as they stand, each written under a temporary name and renamed;
# with arguments (NAME STATUS SECONDS LIMIT LOG), that stage's result joins the report first.
write_results() {
  python3 - "$results" "$out/gpu-check.json.partial" "$@" <<PY || echo "gpu-check.sh: could not write the report" >&2
import json, sys
if len(sys.argv) > 3:
    name, status, seconds, limit, log = sys.argv[3:]
    with open(sys.argv[1], "a") as results:
        print(json.dumps({"stage": name, "status": status, "seconds": int(seconds),
                          "limit": int(limit),
                          "output_tail": open(log, errors="replace").read()[-4000:]}), file=results)
stages = [json.loads(line) for line in open(sys.argv[1])]
report = {"date": "$(date -u +%FT%TZ)", "revision": "$revision", "machine": "$(uname -m)",
          "device": "$device", "dry_run": $dry_run == 1, "budget_seconds": $budget,
          "seconds": $((SECONDS - start)),
          "planned": "${planned[*]}".split(), "not_built": $not_built, "stages": stages}
json.dump(report, open(sys.argv[2], "w"), indent=1)
PY
  mv -f "$out/gpu-check.json.partial" "$out/gpu-check.json"
  tar -C "$logs" -czf "$out/logs.tgz.partial" --exclude=checkpoints --exclude='*.bin' \
    --exclude='*.safetensors' . && mv -f "$out/logs.tgz.partial" "$out/logs.tgz"
}

# The revision the binaries were built from (their --version), else this tree's.
binaries_revision() {
  local text
  if text=$("$bin/sps" --version 2>/dev/null); then
    sed -n 's/^revision //p' <<<"$text"
  else
    git rev-parse --short=12 HEAD 2>/dev/null || echo unknown
  fi
}

# Whether stage NAME runs: every stage, or those --only names and the two the others need.
selected() {
  [ -z "$only" ] || [[ $only == *",$1,"* ]] || [ "$1" = gpu ] || [ "$1" = build ]
}

# run_stage NAME LIMIT MINIMUM FUNCTION: runs the stage (unless --only names others) in its
# own shell, stopped after LIMIT seconds, or after what is left of the budget when that is
# less; skipped (as status 77) when less than MINIMUM is left. Records passed, failed,
# skipped or timed out, the seconds, the limit and the end of its output.
run_stage() {
  local name=$1 limit=$2 minimum=$3 function=$4
  selected "$name" || return 0
  local begin=$SECONDS status rc=0
  if [ "$budget" -gt 0 ]; then
    local left=$((budget - (SECONDS - start) - reserve))
    [ $left -ge "$limit" ] || limit=$left
  fi
  rm -f "$logs/$name.out" "$logs/$name-rerun.out"  # a CUDA test stage's, from an earlier run
  if [ "$limit" -lt "$minimum" ]; then
    echo "skipped: ${limit}s of the budget left, the stage needs ${minimum}s" >"$logs/$name.log"
    rc=77
  else
    timeout --kill-after=5 "$limit" bash -uo pipefail -c "$function" >"$logs/$name.log" 2>&1 ||
      rc=$?
  fi
  case $rc in
    0) status=passed ;;
    77) status=skipped ;;
    124 | 137)
      status="timed out after ${limit}s"
      # A CUDA test stage prints its tests' output when they end: here, their output so far.
      [ ! -f "$logs/$name.out" ] ||
        { echo "timed out; the end of $name.out:" && tail -n 50 "$logs/$name.out"; } >>"$logs/$name.log"
      ;;
    *) status=failed ;;
  esac
  [ "$status" = passed ] || [ "$status" = skipped ] || failed=1
  printf '%-16s %s (%ds)\n' "$name" "$status" $((SECONDS - begin))
  [ "$status" = passed ] || tail -5 "$logs/$name.log" | sed 's/^/    /'
  write_results "$name" "$status" $((SECONDS - begin)) "$limit" "$logs/$name.log"
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
      ninja -C "$bin" sps test_cuda || return 1
  fi
  "$bin/sps" --version >/dev/null  # the binary runs here (its libraries are found)
}

# The binary sees the GPU and says so (on the CPU, in a dry run: it runs).
stage_version() {
  local text
  text=$("$bin/sps" --version) || return 1
  echo "$text"
  [ "$device" = cpu ] || grep -q "; $device " <<<"$text"
}

# The golden cases the CUDA tests run: this tree's (the binaries may have been built in
# another folder, whose path they would look in).
use_golden() {
  export SPS_GOLDEN_DIR=$PWD/tests/golden
}

# The tests that failed in gtest's output FILE, one a line: those it lists as failed, plain
# (Suite.Test) and parameterised (Prefix/Suite.Test/Param) names, not the count line; and
# the test it was running when the output ends without that test's result (a crash prints
# no FAILED line).
failing_tests() {
  sed -nE 's/^\[  FAILED  \] ([A-Za-z_][A-Za-z0-9_]*(\/[A-Za-z0-9_]+)?\.[A-Za-z_][A-Za-z0-9_]*(\/[A-Za-z0-9_]+)?)(,.*| .*)?$/\1/p' \
    "$1"
  awk '/^\[ RUN      \] / { running = $4; next }
       /^\[ +(OK|FAILED|SKIPPED) +\] / { running = "" }
       END { if (running != "") print running }' "$1"
}

# cuda_tests NAME FILTER [COMMAND…]: the CUDA tests FILTER selects run (none skipped: a skip
# here means the GPU was not seen; none selected fails too) and pass, under COMMAND (a
# sanitizer) when given. A failing test runs again with every launch synchronous, so that
# its error names the kernel that caused it rather than the next copy; not under a
# sanitizer, whose report names the kernel itself.
cuda_tests() {
  local name=$1 filter=$2 output=$logs/$1.out
  shift 2
  use_golden
  "$@" "$bin/test_cuda" --gtest_brief=0 --gtest_filter="$filter" >"$output" 2>&1
  local rc=$?
  cat "$output"
  if [ $rc = 0 ]; then
    if grep -q '^\[  SKIPPED \]' "$output"; then echo "$name: tests were skipped"; return 1; fi
    if ! grep -qE '^\[  PASSED  \] [1-9][0-9]* test' "$output"; then
      echo "$name: no test selected by $filter"
      return 1
    fi
    return 0
  fi
  [ $# = 0 ] || return 1
  local failing
  failing=$(failing_tests "$output" | sort -u | paste -sd:)
  if [ -n "$failing" ]; then
    echo "rerun: CUDA_LAUNCH_BLOCKING=1 test_cuda --gtest_filter=$failing"
    CUDA_LAUNCH_BLOCKING=1 "$bin/test_cuda" --gtest_filter="$failing" >"$logs/$name-rerun.out" 2>&1
    tail -40 "$logs/$name-rerun.out"
  fi
  return 1
}
stage_kernels() { cuda_tests kernels '-*CudaGolden.*:CudaModel.*'; }
stage_golden() { cuda_tests golden '*CudaGolden.*'; }
# Whole training steps and cached generation against the CPU, cached decode against the
# GPU's own full forward, two steps bit for bit.
stage_model() { cuda_tests model 'CudaModel.*'; }

# Hopper code is in the binary as sm_90a machine code, and no kernel uses local memory. A
# cuobjdump that fails fails the stage.
stage_sass() {
  command -v cuobjdump >/dev/null || { echo "cuobjdump not found"; return 1; }
  local elf=$bin/sps listing sass
  [ ! -f "$bin/bundle/sps" ] || elf=$bin/bundle/sps
  listing=$(cuobjdump --list-elf "$elf") || { echo "cuobjdump --list-elf failed"; return 1; }
  echo "$listing"
  grep -q sm_90a <<<"$listing" || { echo "no sm_90a code in $elf"; return 1; }
  sass=$(cuobjdump --dump-sass "$elf") || { echo "cuobjdump --dump-sass failed"; return 1; }
  grep -q 'Function : ' <<<"$sass" || { echo "cuobjdump --dump-sass listed no kernel"; return 1; }
  echo "$(grep -c 'Function : ' <<<"$sass") kernels disassembled"
  if grep -qE '\b(LDL|STL)\b' <<<"$sass"; then
    echo "local memory used:"
    grep -E 'Function : |\b(LDL|STL)\b' <<<"$sass" | grep -B1 -E '\b(LDL|STL)\b' | head -40
    return 1
  fi
}

# sps train on the GPU follows the CPU: the same micro recipe on random tokens, 48 steps (of
# 256 tokens) on each device, every step's loss and the validation NLL within 1e-3
# (relative); on bf16 GEMM operands (system.precision=bf16) within 3e-2, and not equal to
# fp32's.
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
  local tokens=$((train_steps * 256))  # 12288 for 48 steps
  cat >"$dir/recipe.yaml" <<YAML
model: {family: sps, n_layer: 2, n_head: 2, hidden_size: 64, intermediate_size: 96, vocab_size: 64,
        block_size: 32, window_size: 4, eos_token_id: 60, predict_token_id: 61, pad_token_id: 63}
training: {micro_batch_size: 4, global_batch_size: 8, max_tokens: $tokens, eval_total_tokens: 512,
           eval_interval_tokens: $((tokens / 3)), log_interval: 1, save_every: 1048576,
           rolling_save_every: 1048576, chunk_size_units: 4}
optimizer: {learning_rate: 0.01}
scheduler: {warmup_tokens: $((tokens / 12)), lr_decay_tokens: $((tokens / 3)), min_lr: 0.001}
data: {dataset: $dir/data}
YAML
  local precision
  "$bin/sps" train --config "$dir/recipe.yaml" --device cpu system.out_dir="$dir/cpu" | tail -2 ||
    return 1
  for precision in $precisions; do
    "$bin/sps" train --config "$dir/recipe.yaml" --device $device system.precision=$precision \
      system.out_dir="$dir/$device-$precision" | tail -2 || return 1
  done
  echo -n "fp32: " && compare_runs "$dir/cpu" "$dir/$device-fp32" 0 1e-3 || return 1
  [[ $precisions != *bf16* ]] ||
    { echo -n "bf16: " && compare_runs "$dir/cpu" "$dir/$device-bf16" 1e-6 3e-2; }
}

# compare_runs REFERENCE RUN LOW HIGH: passes when the largest relative difference between
# the two run folders' losses and validation NLLs (every step's, and more) lies in
# [LOW, HIGH).
compare_runs() {
  python3 - "$1/metrics.jsonl" "$2/metrics.jsonl" "$3" "$4" "$train_steps" <<'PY'
import json, sys
def read(path):
    lines = [json.loads(l) for l in open(path)]
    return [l["loss"] for l in lines if "loss" in l] + [l["val_nll"] for l in lines if "val_nll" in l]
reference, run = read(sys.argv[1]), read(sys.argv[2])
low, high = float(sys.argv[3]), float(sys.argv[4])
assert len(reference) == len(run) > int(sys.argv[5])
worst = max(abs(a - b) / abs(b) for a, b in zip(run, reference))
print(f"final val NLL {reference[-1]:.6f} and {run[-1]:.6f}, worst relative difference {worst:.2e}")
sys.exit(0 if low <= worst < high else 1)
PY
}

# sps eval on the GPU follows the CPU: the train stage's checkpoint scored on its
# validation file on each device, the NLL within 1e-5 (relative).
stage_eval() {
  local dir=$logs/train on
  [ -d "$dir/cpu/checkpoints" ] || { echo "no checkpoint: the train stage did not run"; return 1; }
  for on in cpu $device; do
    "$bin/sps" eval --checkpoint "$dir/cpu" --tasks "val:$dir/data/val.bin" --device $on \
      --quiet --out "$dir/eval-$on.json" >/dev/null || return 1
  done
  python3 - "$dir/eval-cpu.json" "$dir/eval-$device.json" <<'PY'
import json, sys
cpu, gpu = (json.load(open(p))["val"]["nll"] for p in sys.argv[1:])
print(f"val NLL cpu {cpu:.8f} device {gpu:.8f}, relative difference {abs(cpu - gpu) / cpu:.2e}")
sys.exit(0 if abs(cpu - gpu) <= 1e-5 * cpu else 1)
PY
}

# Two processes under mpirun, each on the GPU of its local rank (both on GPU 0 where there is
# one), gradients summed by NCCL or through host copies: within 1e-3 of two CPU processes.
# Skipped where mpirun is not installed, and with a bundle unless the machine's mpirun is
# the bundle's Open MPI (another mpirun cannot start the bundle's MPI_Init).
stage_processes() {
  command -v mpirun >/dev/null || { echo "mpirun is not installed here"; return 77; }
  local theirs ours
  theirs=$(mpirun --version 2>&1)
  theirs=${theirs%%$'\n'*}
  if [ -n "$bundle" ]; then
    ours=$(cat "$bin/bundle/mpi-version" 2>/dev/null)
    if [ "$ours" != "$theirs" ]; then
      echo "the bundle's MPI is '${ours:-unknown}', this machine's mpirun is '$theirs': skipped"
      return 77
    fi
  fi
  local dir=$logs/train mpi_device=$device
  [ -f "$dir/recipe.yaml" ] || { echo "no recipe: the train stage did not run"; return 1; }
  [ "$device" = cpu ] || [ "$(nvidia-smi -L | wc -l)" -lt 2 ] || mpi_device=cuda
  local mpi="mpirun --allow-run-as-root --oversubscribe --bind-to none -np 2"
  rm -rf "$dir/mpi-reference" "$dir/mpi-$mpi_device"
  OMP_NUM_THREADS=1 $mpi "$bin/sps" train --config "$dir/recipe.yaml" --device cpu \
    system.out_dir="$dir/mpi-reference" | tail -2 || return 1
  $mpi "$bin/sps" train --config "$dir/recipe.yaml" --device $mpi_device \
    system.out_dir="$dir/mpi-$mpi_device" | tail -2 || return 1
  compare_runs "$dir/mpi-reference" "$dir/mpi-$mpi_device" 0 1e-3
}

# refused COMMAND…: exit status 2 and one line starting "sps: " (printed).
refused() {
  local text rc=0
  text=$("$@" 2>&1) || rc=$?
  echo "$text"
  [ $rc -eq 2 ] && [ "$(wc -l <<<"$text")" -eq 1 ] && [[ $text == "sps: "* ]]
}

# With a GPU present, a command still refuses what the backend cannot do, in one line: an
# index out of range, and a command without GPU kernels (sps analyze gradients). In a dry run
# both are refused for want of a GPU.
stage_device_errors() {
  local text
  text=$(refused "$bin/sps" bench attention --device cuda:64) || { echo "$text"; return 1; }
  echo "$text"
  [ "$device" = cpu ] || [[ $text == "sps: --device: cuda:64 asked for, but this machine has "* ]] ||
    return 1
  text=$(refused "$bin/sps" analyze gradients --checkpoint "$logs/train/cpu" \
    --out "$logs/gradients.json" --device cuda:0) || { echo "$text"; return 1; }
  echo "$text"
  [ "$device" = cpu ] || [[ $text == *"the CUDA backend does not run"* ]]
}

# The attention alone at the paper's shape (T = 4096, w = 64, 12 heads of 64), fp32 and bf16:
# the blocked kernels for standard and sps, and sps on the reference kernels. Prints numbers;
# passes when it runs.
stage_bench_attention() {
  local precision
  for precision in $attention_precisions; do
    "$bin/sps" bench attention --device $device --precision $precision $attention_shape || return 1
  done
}

# The GPU's GEMM rate at n = 8192 (bf16 operands rounded before the timed products), then a
# training step of scale s at the paper's T = 4096 (micro-batch 4), standard and sps w64,
# bf16 and fp32, one warm-up and two timed steps: step time, tokens/s and model FLOP/s
# against the GEMM rate measured beside it. Prints numbers; passes when it runs.
stage_bench_step() {
  local precision family
  for precision in $precisions; do
    "$bin/sps" bench gemm --device $device --precision $precision $gemm_shape || return 1
    for family in standard sps; do
      "$bin/sps" bench step $step_shape model.family=$family model.window_size=64 \
        --device $device --precision $precision --json || return 1
    done
  done
}

# Decode of scale s, standard and sps w64, alternated step by step: B = 16 rows, P = 1024
# prompt tokens (the paper's), N = 256 new ones (the paper's 3072 left for a later call):
# tokens/s, KV bytes, and decode against the GPU's copy bandwidth and GEMM rate measured
# beside it. Prints numbers; passes when it runs.
stage_bench_generate() {
  "$bin/sps" bench generate model.window_size=64 $generate_shape --families standard,sps \
    --interleave --warmup 0 --runs 1 --device $device
}

# compute-sanitizer's racecheck over the attention and top-k kernels at small shapes, with
# the other CUDA test stages' checks (the tests ran and passed).
stage_racecheck() {
  command -v compute-sanitizer >/dev/null || { echo "compute-sanitizer not found"; return 1; }
  cuda_tests racecheck "$race_filter" \
    compute-sanitizer --tool racecheck --target-processes all --error-exitcode 1
}

# memcheck over the small CUDA tests; API errors are not reported (the libraries' own, such
# as cuBLASLt's probing, are not ours; the tests check every error our calls return).
stage_memcheck() {
  command -v compute-sanitizer >/dev/null || { echo "compute-sanitizer not found"; return 1; }
  cuda_tests memcheck "$memcheck_filter" compute-sanitizer --tool memcheck \
    --report-api-errors no --target-processes all --error-exitcode 1
}

export -f compare_runs use_golden failing_tests cuda_tests refused \
  $(declare -F | awk '$3 ~ /^stage_/ {print $3}')

# name, limit and minimum seconds (a source build: 1800), function. The first pass (gpu to
# bench-generate) must fit the per-command limit of a lent GPU (600 s): its limits add up to
# 505; expected, about half.
build_limit=45
[ -n "$bundle" ] || build_limit=1800
stages=(
  "gpu 10 10 stage_gpu"
  "build $build_limit $build_limit stage_build"
  "version 10 10 stage_version"
  "kernels 100 100 stage_kernels"
  "golden 30 30 stage_golden"
  "model 45 45 stage_model"
  "train 45 45 stage_train"
  "eval 15 15 stage_eval"
  "processes 30 30 stage_processes"
  "device-errors 10 10 stage_device_errors"
  "sass 30 30 stage_sass"
  "bench-attention 30 30 stage_bench_attention"
  "bench-step 60 60 stage_bench_step"
  "bench-generate 45 45 stage_bench_generate"
  "racecheck 90 45 stage_racecheck"
  "memcheck 300 60 stage_memcheck"
)
for stage in "${stages[@]}"; do
  name=${stage%% *}
  selected "$name" || continue
  planned+=("$name")
done
write_results
for stage in "${stages[@]}"; do
  read -r name limit minimum function <<<"$stage"
  run_stage "$name" "$limit" "$minimum" "$function"
  # Once per run: the report rewritten after every stage reuses it.
  [ "$name" != build ] || revision=$(binaries_revision)
  # Nothing runs without the GPU and the binaries.
  if [ $failed = 1 ] && { [ "$name" = gpu ] || [ "$name" = build ]; }; then break; fi
done
write_results
echo "report: $out/gpu-check.json, logs: $out/logs.tgz"
exit $failed

#!/usr/bin/env bash
# The fault-injection set of docs/reliability.md: what a careful user can do wrong, or what can
# go wrong around a run, tried against the built binary, each with the outcome it must have.
# Prints one line per check (ok / FAIL) and a summary; exits 1 if any check failed.
# Usage: scripts/fault-injection.sh [path/to/sps]   (default build/release/sps; ~2 minutes)
set -uo pipefail
cd "$(dirname "$0")/.."
sps=$(realpath "${1:-build/release/sps}")
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
passed=0 failed=0

check() {  # check NAME CONDITION-COMMAND...
  local name=$1; shift
  if "$@"; then passed=$((passed + 1)); echo "ok    $name"
  else failed=$((failed + 1)); echo "FAIL  $name"; fi
}
# Runs a command; true when it exits with status $1 and prints exactly one stderr line
# containing $2.
one_line() {
  local status=$1 text=$2; shift 2
  local err rc
  err=$("$@" 2>&1 >/dev/null); rc=$?
  [ "$rc" -eq "$status" ] && [ "$(printf '%s\n' "$err" | wc -l)" -eq 1 ] && [[ "$err" == *"$text"* ]] ||
    { echo "      got rc=$rc: $err" | head -3; return 1; }
}
no_temporaries() { ! find "$1" -name '*.tmp*' 2>/dev/null | grep -q .; }

# ---- a byte-level tokenizer, a corpus, token files and a micro recipe ----
for b in $(seq 0 255); do
  printf '%s %d\n' "$(printf "$(printf '\\%03o' "$b")" | base64)" "$b"
done > "$work/bytes.tok"
python3 - "$work/corpus.jsonl" <<'PY'
import json, random, sys
random.seed(7)
words = "the state prediction slot reads a window of keys and writes its value to the stream".split()
with open(sys.argv[1], "w") as f:
    for i in range(4000):
        f.write(json.dumps({"id": f"doc-{i}", "text": " ".join(random.choice(words) for _ in range(60))}) + "\n")
PY
"$sps" data prepare "$work/corpus.jsonl" --tokenizer "$work/bytes.tok" --val-fraction 0.05 \
  --out "$work/data" 2>/dev/null || { echo "cannot prepare the data"; exit 1; }
cat > "$work/recipe.yaml" <<EOF
model: {family: sps, n_layer: 2, n_head: 2, hidden_size: 32, intermediate_size: 64,
        vocab_size: 320, block_size: 32, window_size: 8, eos_token_id: 256,
        predict_token_id: 257, pad_token_id: 319}
training: {micro_batch_size: 4, global_batch_size: 8, max_tokens: 98304, eval_total_tokens: 1024,
           eval_interval_tokens: 32768, log_interval: 1, save_every: 32768, rolling_save_every: 4096,
           sampler_type: fixed_random_chunk, chunk_size_units: 16}
optimizer: {learning_rate: 0.003}
scheduler: {warmup_tokens: 4096, lr_decay_tokens: 16384, min_lr: 0.0003}
data: {dataset: $work/data}
system: {threads: 1}
EOF
# In the foreground only: a background job must be sps itself, so that signals reach it.
train() { "$sps" train --config "$work/recipe.yaml" "$@"; }
model_of() { echo "$work/$1/checkpoints/final/model.safetensors"; }

echo "== runs and signals"
train system.out_dir="$work/ref" >/dev/null 2>&1
check "an uninterrupted reference run finishes" test -f "$(model_of ref)"
"$sps" train --config "$work/recipe.yaml" system.out_dir="$work/term" >/dev/null 2>&1 & pid=$!
sleep 2; kill -TERM $pid 2>/dev/null; wait $pid; rc=$?
train system.out_dir="$work/term" --resume >/dev/null 2>&1
check "SIGTERM (exit $rc), then --resume: final weights byte-identical" cmp -s "$(model_of ref)" "$(model_of term)"
"$sps" train --config "$work/recipe.yaml" system.out_dir="$work/kill" >/dev/null 2>&1 & pid=$!
sleep 2; kill -KILL $pid 2>/dev/null; wait $pid 2>/dev/null
train system.out_dir="$work/kill" --resume >/dev/null 2>&1
check "SIGKILL, then --resume: final weights byte-identical" cmp -s "$(model_of ref)" "$(model_of kill)"
check "no temporary files left after the kill" no_temporaries "$work/kill"
damaged=0
for i in $(seq 1 10); do
  rm -rf "$work/k"; "$sps" train --config "$work/recipe.yaml" system.out_dir="$work/k" >/dev/null 2>&1 & pid=$!
  sleep "$((RANDOM % 3)).$((RANDOM % 10))"; kill -KILL $pid 2>/dev/null; wait $pid 2>/dev/null
  for m in "$work"/k/checkpoints/*/model.safetensors; do
    [ -f "$m" ] && ! "$sps" eval --checkpoint "$(dirname "$m")" --tasks val --quiet >/dev/null 2>&1 && damaged=$((damaged + 1))
  done
done
check "10 random SIGKILLs: no damaged checkpoint under a final name" test "$damaged" -eq 0
"$sps" train --config "$work/recipe.yaml" system.out_dir="$work/lock" >/dev/null 2>&1 & pid=$!
sleep 1
check "a second trainer in the same folder stops at once, naming the holder" \
  one_line 2 "in use by another sps process (PID $pid)" train system.out_dir="$work/lock"
wait $pid; rc=$?
check "the first trainer finishes unharmed (exit $rc)" test "$rc" -eq 0
check "metrics.jsonl is whole JSON Lines" jq -e . "$work/lock/metrics.jsonl" >/dev/null
train system.out_dir="$work/threads" --stop-after 3 >/dev/null 2>&1
err=$(train system.out_dir="$work/threads" --resume system.threads=2 2>&1 >/dev/null)
check "a resume with another thread count says it is not bit-identical" grep -q "not bit-identical" <<<"$err"

echo "== weights files"
good=$(model_of ref)
python3 - "$good" "$work" <<'PY'
import struct, sys, json, math
src, out = sys.argv[1], sys.argv[2]
data = open(src, "rb").read()
n = struct.unpack("<Q", data[:8])[0]
header, body = data[8:8 + n], data[8 + n:]
def put(name, b): open(f"{out}/{name}.safetensors", "wb").write(b)
put("short_header_length", struct.pack("<Q", n - 1) + data[8:])
put("trailing_byte", data + b"\0")
put("truncated", data[:-1])
h = json.loads(header)
first = min((v for k, v in h.items() if k != "__metadata__"), key=lambda v: v["data_offsets"][0])
off = 8 + n + first["data_offsets"][0]
put("nan_weight", data[:off] + struct.pack("<f", math.nan) + data[off + 4:])
put("inf_weight", data[:off] + struct.pack("<f", math.inf) + data[off + 4:])
PY
for case in short_header_length trailing_byte truncated nan_weight inf_weight; do
  rm -rf "$work/ck"; cp -r "$(dirname "$good")" "$work/ck"
  cp "$work/$case.safetensors" "$work/ck/model.safetensors"
  check "eval refuses a weights file with $case" one_line 2 "model.safetensors" \
    "$sps" eval --checkpoint "$work/ck" --tasks val --quiet
done
check "generate refuses an Inf weight" one_line 2 "non-finite value" \
  "$sps" generate --checkpoint "$work/ck" --prompt "the" --max-new-tokens 4

echo "== data"
big="$work/big.jsonl"
python3 -c "
import json
with open('$big', 'w') as f:
    for i in range(60000): f.write(json.dumps({'text': f'document {i} ' + 'x' * 600}) + '\n')"
for sig in INT TERM KILL; do
  "$sps" data prepare "$big" --tokenizer "$work/bytes.tok" --threads 1 --overwrite \
    --out "$work/p_$sig" >/dev/null 2>&1 & pid=$!
  sleep 0.3; kill -$sig $pid 2>/dev/null; wait $pid 2>/dev/null
  check "data prepare after SIG$sig leaves no temporary file" no_temporaries "$work/p_$sig"
done
"$sps" data prepare "$big" --tokenizer "$work/bytes.tok" --overwrite --out "$work/p_KILL" >/dev/null 2>&1
check "data prepare into the killed run's folder succeeds" test -f "$work/p_KILL/meta.json"
"$sps" data prepare "$big" --tokenizer "$work/bytes.tok" --out "$work/plock" >/dev/null 2>&1 & pid=$!
sleep 0.2
check "a second data prepare into the same folder stops at once" \
  one_line 2 "in use by another sps process" "$sps" data prepare "$big" --tokenizer "$work/bytes.tok" \
  --overwrite --out "$work/plock"
wait $pid
err=$("$sps" data prepare "$work/corpus.jsonl" --tokenizer "$work/bytes.tok" --out "$work/noval" 2>&1 >/dev/null)
check "an empty val.bin is announced" grep -q "no document fell in val.bin" <<<"$err"
mkdir -p "$work/badids"; cp "$work/data/val.bin" "$work/badids/"
# meta.json without the recorded maxima, as token files made elsewhere or before them have.
jq 'del(.train.max_id, .val.max_id)' "$work/data/meta.json" > "$work/badids/meta.json"
python3 -c "
import struct
d = bytearray(open('$work/data/train.bin', 'rb').read()); d[2000:2002] = struct.pack('<H', 257)
open('$work/badids/train.bin', 'wb').write(bytes(d))"
check "PREDICT inside train.bin is refused before the run starts" \
  one_line 2 "token id 257 at position 1000" train data.dataset="$work/badids" system.out_dir="$work/badrun"
check "... and leaves no run folder" test ! -e "$work/badrun"

echo "== sizes and flags"
check "a dry run of a billion layers plans without allocating" \
  bash -c "'$sps' train --config '$work/recipe.yaml' --dry-run model.n_layer=1000000000 >/dev/null"
check "FLOPs of a billion-token block stay positive" \
  bash -c "! '$sps' train --config '$work/recipe.yaml' --dry-run model.block_size=1000000000 | grep -q 'FLOPs/step    -'"
check "a run that cannot fit says needed vs available" one_line 2 "of memory is available" \
  train system.out_dir="$work/huge" model.hidden_size=1048576 model.intermediate_size=1048576
check "eval --val-tokens -5 is refused" one_line 2 "val-tokens" \
  "$sps" eval --checkpoint "$work/ref" --tasks val --val-tokens -5

echo
echo "$passed passed, $failed failed"
[ "$failed" -eq 0 ]

#!/usr/bin/env bash
# The fault-injection set of docs/reliability.md: what a careful user can do wrong, or what can
# go wrong around a run, tried against the built binary, each with the outcome it must have.
# Prints one line per check (ok / FAIL) and a summary; exits 1 if any check failed.
# Usage: scripts/fault-injection.sh [path/to/sps]   (default build/release/sps; ~3 minutes)
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
# (A note, such as that of a file without checksums, is not part of the error.)
one_line() {
  local status=$1 text=$2; shift 2
  local err rc
  err=$("$@" 2>&1 >/dev/null); rc=$?
  err=$(printf '%s\n' "$err" | grep -v '^sps: note: ')
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
  for m in "$work"/k/checkpoints/*/model.safetensors; do  # final names: not *.tmp
    [ -f "$m" ] && [ "${m%.tmp/model.safetensors}" = "$m" ] && ! "$sps" eval --checkpoint "$(dirname "$m")" --tasks val --quiet >/dev/null 2>&1 && damaged=$((damaged + 1))
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
# The same Inf in a file without checksums (as sps wrote them before it recorded any), so that
# the value check, not the checksum, is what refuses it.
h.get("__metadata__", {}).pop("xxh3_128", None)
plain = json.dumps(h).encode().ljust(n, b" ")
put("inf_weight_unchecked", data[:8] + plain + data[8 + n:off] + struct.pack("<f", math.inf) + data[off + 4:])
PY
for case in short_header_length trailing_byte truncated nan_weight inf_weight; do
  rm -rf "$work/ck"; cp -r "$(dirname "$good")" "$work/ck"
  cp "$work/$case.safetensors" "$work/ck/model.safetensors"
  check "eval refuses a weights file with $case" one_line 2 "model.safetensors" \
    "$sps" eval --checkpoint "$work/ck" --tasks val --quiet
done
cp "$work/inf_weight_unchecked.safetensors" "$work/ck/model.safetensors"
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
# What a SIGKILL before the first write leaves (made by hand: the kill above may land later).
mkdir -p "$work/p_stale" && : > "$work/p_stale/.sps.lock"
"$sps" data prepare "$big" --tokenizer "$work/bytes.tok" --out "$work/p_stale" >/dev/null 2>&1
check "data prepare into a folder holding only a stale lock needs no --overwrite" \
  test -f "$work/p_stale/meta.json"
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
cp "$work/data/meta.json" "$work/badids/meta.json"
for edit in '.vocab_size = -5' '.train.max_id = -1' '.padded_vocab_size = 2'; do
  jq "$edit" "$work/data/meta.json" > "$work/badids/meta.json"
  check "meta.json with $edit is refused" one_line 2 "meta.json: " \
    train data.dataset="$work/badids" system.out_dir="$work/badrun"
done

echo "== checkpoints and imports"
rm -rf "$work/ck"; cp -r "$(dirname "$good")" "$work/ck"
python3 - "$work/ck/model.safetensors" <<'PY'
import struct, sys, json
path = sys.argv[1]
data = bytearray(open(path, "rb").read())
n = struct.unpack("<Q", data[:8])[0]
h = json.loads(data[8:8 + n])
t = h["transformer.h.1.mlp.down_proj.weight"]
data[8 + n + t["data_offsets"][0] + 4 * 17 + 3] ^= 0x20  # an exponent bit of one weight
open(path, "wb").write(bytes(data))
PY
check "eval refuses a weight with one flipped exponent bit, naming the tensor" \
  one_line 2 "tensor 'transformer.h.1.mlp.down_proj.weight' does not match its checksum" \
  "$sps" eval --checkpoint "$work/ck" --tasks val --quiet
check "serve refuses it too" one_line 2 "does not match its checksum" \
  "$sps" serve --checkpoint "$work/ck" --port 0
for edit in "n_head: 2/n_head: 4" "window_size: 8/window_size: 4" "rope_theta: 10000/rope_theta: 20000" \
            "norm_eps: 1e-06/norm_eps: 1e-05"; do
  rm -rf "$work/ck"; cp -r "$(dirname "$good")" "$work/ck"
  sed -i "s/$edit/" "$work/ck/config.yaml"
  check "eval refuses config.yaml edited ${edit%%/*} -> ${edit##*/}, naming both values" \
    one_line 2 "was saved with model.${edit%%:*} = " "$sps" eval --checkpoint "$work/ck" --tasks val --quiet
done
rm -rf "$work/ck"; cp -r "$(dirname "$good")" "$work/ck"
python3 - "$work/ck/model.safetensors" <<'PY'
import struct, sys, json
path = sys.argv[1]
data = open(path, "rb").read()
n = struct.unpack("<Q", data[:8])[0]
h = json.loads(data[8:8 + n])
del h["__metadata__"]["xxh3_128"]
text = json.dumps(h, separators=(",", ":")).encode()
text += b" " * (-len(text) % 8)
open(path, "wb").write(struct.pack("<Q", len(text)) + text + data[8 + n:])
PY
err=$("$sps" eval --checkpoint "$work/ck" --tasks val --quiet 2>&1 >/dev/null); rc=$?
check "a checkpoint written before checksums loads, with one note" \
  test "$rc" -eq 0 -a "$(grep -c 'has no tensor checksums' <<<"$err")" -eq 1
train system.out_dir="$work/dmg" --stop-after 2 >/dev/null 2>&1
latest="$work/dmg/checkpoints/latest"
python3 - "$latest/optimizer.safetensors" <<'PY'
import struct, sys
path = sys.argv[1]
data = bytearray(open(path, "rb").read())
n = struct.unpack("<Q", data[:8])[0]
data[8 + n + 1001] ^= 0x10
open(path, "wb").write(bytes(data))
PY
check "resume refuses a damaged AdamW moment, naming file and tensor" \
  one_line 2 "optimizer.safetensors: tensor '" train system.out_dir="$work/dmg" --resume
python3 - "$work/bomb.pt" <<'PY'
import sys, zipfile
with zipfile.ZipFile(sys.argv[1], "w", zipfile.ZIP_DEFLATED) as z:
    z.writestr("archive/data.pkl", b"\x80\x02(" + b"N" * (64 << 20) + b"t.")
PY
check "convert refuses a $(($(stat -c %s "$work/bomb.pt") / 1024)) KB archive whose pickle inflates to 64 MB" \
  one_line 2 "would inflate to" "$sps" convert "$work/bomb.pt" --to sps --out "$work/bomb"

echo "== the server"
"$sps" serve --checkpoint "$work/ref" --port 0 --threads 1 --timeout 1 2>"$work/serve.err" & spid=$!
for _ in $(seq 100); do grep -q "http://" "$work/serve.err" && break; sleep 0.1; done
port=$(sed -n 's/.*127.0.0.1:\([0-9]*\).*/\1/p' "$work/serve.err" | head -1)
check "a second server on port $port fails in one line naming the port" \
  one_line 2 "port $port is in use" timeout 60 "$sps" serve --checkpoint "$work/ref" --port "$port"
check "slow clients are closed at the deadline while /health answers in under a second" \
  python3 - "$port" <<'PY'
import socket, sys, time, urllib.request
port = int(sys.argv[1])
# More slow clients than the server has workers, fewer than --max-connections-per-client.
slow = [socket.create_connection(("127.0.0.1", port)) for _ in range(30)]
for s in slow: s.sendall(b"G")
time.sleep(0.3)
start = time.time()
ok = urllib.request.urlopen(f"http://127.0.0.1:{port}/health", timeout=1).status == 200
ok = ok and time.time() - start < 1
for s in slow:
    s.settimeout(3)
    ok = ok and s.recv(100).startswith(b"HTTP/1.1 408")
sys.exit(0 if ok else 1)
PY
check "pipelined requests are answered in order" python3 - "$port" <<'PY'
import socket, sys
s = socket.create_connection(("127.0.0.1", int(sys.argv[1])))
s.sendall(b"GET /health HTTP/1.1\r\n\r\nGET /v1/models HTTP/1.1\r\nConnection: close\r\n\r\n")
s.settimeout(5)
data = b""
while chunk := s.recv(65536): data += chunk
sys.exit(0 if data.count(b"HTTP/1.1 200") == 2 and data.find(b"ok") < data.find(b"context_length") else 1)
PY
kill -TERM $spid; wait $spid
check "--api-key '' is refused (no open server by accident)" one_line 2 "API key is empty" \
  "$sps" serve --checkpoint "$work/ref" --port 0 --api-key ""
check "--ctx 1048576 --parallel 1024 says needed vs available" one_line 2 "of memory is available" \
  "$sps" serve --checkpoint "$work/ref" --port 0 --ctx 1048576 --parallel 1024

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

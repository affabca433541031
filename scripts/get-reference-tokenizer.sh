#!/usr/bin/env bash
# Installs js-tiktoken (a pure-JavaScript GPT-2 tokenizer that ships the gpt2 ranks) into
# ${SPS_HOME:-$HOME/.cache/sps}/node/. The tokenizer tests compare sps against it; sps
# never uses it. Idempotent: does nothing when the pinned version is already there.
set -euo pipefail

PACKAGE=js-tiktoken
VERSION=1.0.21

prefix="${SPS_HOME:-$HOME/.cache/sps}/node"
manifest="$prefix/node_modules/$PACKAGE/package.json"

installed() { [ -f "$manifest" ] && grep -q "\"version\": *\"$VERSION\"" "$manifest"; }

installed && exit 0

# One install at a time (tests may call this script in parallel).
mkdir -p "$prefix"
exec 9>"$prefix/.lock"
flock 9
installed && exit 0

if ! command -v npm >/dev/null; then
  echo "get-reference-tokenizer: npm is needed to install $PACKAGE (apt-get install npm)" >&2
  exit 1
fi

echo "get-reference-tokenizer: installing $PACKAGE@$VERSION into $prefix"
log=$(mktemp)
trap 'rm -f "$log"' EXIT
if ! npm install --loglevel=error --no-audit --no-fund --no-save --prefix "$prefix" "$PACKAGE@$VERSION" \
    >/dev/null 2>"$log"; then
  echo "get-reference-tokenizer: could not install $PACKAGE@$VERSION from the npm registry (check" \
    "the network and npm's registry settings): $(grep -m1 -i err "$log" || tail -n1 "$log")" >&2
  exit 1
fi
installed || { echo "get-reference-tokenizer: $PACKAGE did not install" >&2; exit 1; }

#!/usr/bin/env bash
# Installs the official `openai` npm package into ${SPS_HOME:-$HOME/.cache/sps}/node-openai/.
# The server tests drive `sps serve` with it (a client nobody here wrote); sps never uses it.
# Idempotent: does nothing when the pinned version is already there.
set -euo pipefail

PACKAGE=openai
VERSION=5.12.0  # runs on Node 18+ (the 6.x and later releases need newer Node)

prefix="${SPS_HOME:-$HOME/.cache/sps}/node-openai"
manifest="$prefix/node_modules/$PACKAGE/package.json"

installed() { [ -f "$manifest" ] && grep -q "\"version\": *\"$VERSION\"" "$manifest"; }

installed && exit 0

# One install at a time (tests may call this script in parallel).
mkdir -p "$prefix"
exec 9>"$prefix/.lock"
flock 9
installed && exit 0

if ! command -v npm >/dev/null; then
  echo "get-openai-client: npm is needed to install $PACKAGE (apt-get install npm)" >&2
  exit 1
fi

echo "get-openai-client: installing $PACKAGE@$VERSION into $prefix"
log=$(mktemp)
trap 'rm -f "$log"' EXIT
if ! npm install --loglevel=error --no-audit --no-fund --no-save --prefix "$prefix" "$PACKAGE@$VERSION" \
    >/dev/null 2>"$log"; then
  echo "get-openai-client: could not install $PACKAGE@$VERSION from the npm registry (check" \
    "the network and npm's registry settings): $(grep -m1 -i err "$log" || tail -n1 "$log")" >&2
  exit 1
fi
installed || { echo "get-openai-client: $PACKAGE did not install" >&2; exit 1; }

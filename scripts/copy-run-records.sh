#!/usr/bin/env bash
# Copies the records of an experiment folder (what `sps experiment report` reads, without
# checkpoints or logs) into another folder, e.g. docs/results/<matrix>, and rebuilds the
# report there with its figures, so the published tables come from the records beside them:
#   matrix.yaml; runs/<name>/{run.json, eval.json, bench.json, train/metrics.jsonl,
#   train/config.yaml, decay_<N>/metrics.jsonl, decay_<N>/config.yaml}
# Runs still going are copied as far as they got (the report marks their curves partial).
# Paths of this machine in the records become placeholders, so that published records name no
# machine: the experiment folder's absolute path ${EXPERIMENT_DIR}, $SPS_HOME ${SPS_HOME}.
# Usage: copy-run-records.sh EXPERIMENT_DIR DEST [SPS_BINARY]
set -euo pipefail
[ $# -ge 2 ] || { echo "usage: copy-run-records.sh EXPERIMENT_DIR DEST [SPS_BINARY]" >&2; exit 2; }
src=$1 dest=$2 sps=${3:-$(dirname "$0")/../build/release/sps}
[ -d "$src/runs" ] || { echo "copy-run-records: $src/runs: no such folder" >&2; exit 2; }
command -v gnuplot > /dev/null ||
  { echo "copy-run-records: gnuplot not found (make deps installs it): the figures need it" >&2; exit 2; }
mkdir -p "$dest"
src_abs=$(realpath "$src")
sps_home=$(realpath -m "${SPS_HOME:-$HOME/.cache/sps}")
cp "$src/matrix.yaml" "$dest/"
(cd "$src" && find runs -type f \( -name run.json -o -name eval.json -o -name bench.json \
    -o -path '*/train/metrics.jsonl' -o -path '*/train/config.yaml' \
    -o -path '*/decay_*/metrics.jsonl' -o -path '*/decay_*/config.yaml' \) \
    -not -path '*/checkpoints/*' -print0) |
  while IFS= read -r -d '' f; do
    mkdir -p "$dest/$(dirname "$f")"
    sed -e "s|$src_abs/|\${EXPERIMENT_DIR}/|g" -e "s|$sps_home/|\${SPS_HOME}/|g" "$src/$f" > "$dest/$f"
  done
rm -rf "$dest/figures"  # no figure of an earlier copy stays unless drawn again
"$sps" experiment report "$dest"

#!/usr/bin/env bash
# Installs js-tiktoken (a pure-JavaScript GPT-2 tokenizer that ships the gpt2 ranks) into
# ${SPS_HOME:-$HOME/.cache/sps}/node/. The tokenizer tests compare sps against it; sps
# never uses it. Idempotent.
exec bash "$(dirname "$0")/npm-package.sh" get-reference-tokenizer js-tiktoken 1.0.21 node

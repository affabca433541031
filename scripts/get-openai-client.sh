#!/usr/bin/env bash
# Installs the official `openai` npm package into ${SPS_HOME:-$HOME/.cache/sps}/node-openai/.
# The server tests drive `sps serve` with it (a client nobody here wrote); sps never uses it.
# 5.12.0 runs on Node 18+ (the 6.x and later releases need newer Node). Idempotent.
exec bash "$(dirname "$0")/npm-package.sh" get-openai-client openai 5.12.0 node-openai

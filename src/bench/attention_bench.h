#pragma once
// `sps bench attention`: times the family-masked attention of a device's backend for
// standard and sps.
#include <cstdint>

#include "ops/device.h"

namespace sps {

// One sequence of `tokens` tokens, `heads` heads of `head_dim`, one document, random float
// data, on `device` with `precision` (bf16: a GPU's). For standard (1 stream) and sps (persistent
// input stream, predict stream windowed by `window`), prints the score pairs computed, their ratio
// to dense causal attention over the same slots, and the median time and GFLOP/s of forward and
// backward over `repeats` runs (after one warm-up). Flops: forward 4·pairs·D (Q·Kᵀ and P·V),
// backward 10·pairs·D (Q·Kᵀ recomputed, dP = dO·Vᵀ, dQ, dK, dV). Where the backend's attention
// reads a tile plan, sps is also timed without one (its reference kernels). Prints numbers; asserts
// nothing.
void run_attention_bench(const ops::Device& device, ops::Precision precision, int64_t tokens,
                         int64_t window, int64_t heads, int64_t head_dim, int repeats);

// `sps bench attention --decode`: one decode step's attention (ops.h attention_decode, or
// attention_decode_bf16_cache with `bf16_cache`) for `batch` sequences over `tokens` cached
// rows each, through `layers` caches of their own, so that the rows come from memory as in a
// model and not from the last cache level. Standard: one query row per sequence over its
// persistent rows; sps: two, over the persistent rows and a full ring of `window` windowed
// rows. Prints per family the median milliseconds of a step through every layer, the cache
// bytes it reads per second and that against the copy bandwidth, and the score pairs.
// Prints numbers; asserts nothing.
void run_decode_attention_bench(const ops::Device& device, int64_t batch, int64_t tokens,
                                int64_t window, int64_t heads, int64_t head_dim, bool bf16_cache,
                                int64_t layers, int repeats);

}  // namespace sps

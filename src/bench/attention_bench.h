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

}  // namespace sps

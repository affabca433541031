#pragma once
// FLOP counts for throughput reports (multiply-add = 2 FLOPs; backward = 2 × forward).
#include <cstdint>

#include "model/config.h"
#include "model/family.h"

namespace sps {

// Forward + backward of one micro-batch of B sequences of T tokens: every linear layer on
// every slot, the LM head on the readout slots, and 12·D FLOPs per attention score pair
// computed (Q·Kᵀ and P·V forward, their gradients backward) over all layers and heads.
inline double training_step_flops(const ModelConfig& c, int64_t B, int64_t T,
                                  double attention_pairs) {
  const double d = double(c.hidden_size), F = double(c.intermediate_size);
  const double slots = double(B) * double(T) * double(family_by_name(c.family).streams());
  const double layer_matmul = 4 * d * d + 3 * d * F;  // c_attn, c_proj, gate, up, down
  const double forward = 2 * slots * double(c.n_layer) * layer_matmul +
                         2 * double(B) * double(T) * d * double(c.vocab_size) +
                         4 * double(c.head_dim()) * attention_pairs;
  return 3 * forward;
}

// One cached decode step of `rows` sequences, one new token each: every linear layer on the
// token's slots (but the last layer's on the readout slot alone past its QKV) and the LM head
// on one readout slot per row.
inline double decode_projection_flops(const ModelConfig& c, int64_t rows) {
  const double d = double(c.hidden_size), F = double(c.intermediate_size);
  const double slots = double(rows) * double(family_by_name(c.family).streams());
  // Every slot's QKV in every layer; the output projection and MLP of the last layer only
  // for the readout slot (the other stream's last outputs feed nothing).
  const double qkv = 3 * d * d, rest = d * d + 3 * d * F;
  return 2 * slots * double(c.n_layer) * qkv + 2 * slots * double(c.n_layer - 1) * rest +
         2 * double(rows) * rest + 2 * double(rows) * d * double(c.vocab_size);
}

// Its attention: 4·D FLOPs per score pair computed (Q·Kᵀ and P·V) over all layers and heads.
inline double decode_attention_flops(const ModelConfig& c, double attention_pairs) {
  return 4 * double(c.head_dim()) * attention_pairs;
}

inline double decode_step_flops(const ModelConfig& c, int64_t rows, double attention_pairs) {
  return decode_projection_flops(c, rows) + decode_attention_flops(c, attention_pairs);
}

// Score pairs of dense causal attention over the same slots, all layers and heads.
inline double dense_causal_pairs(const ModelConfig& c, int64_t B, int64_t T) {
  const double S = double(T) * double(family_by_name(c.family).streams());
  return double(B) * double(c.n_layer) * double(c.n_head) * S * (S + 1) / 2;
}

}  // namespace sps

#pragma once
// Per-batch facts derived from the input tokens: the slot tokens in stream-major order,
// each token's RoPE position and document, and which loss terms count (docs/model.md §3–§5).
#include <cstdint>
#include <vector>

#include "model/config.h"
#include "model/family.h"

namespace sps {

struct SlotLayout {
  int64_t batch = 0, tokens = 0, streams = 1;
  std::vector<int32_t> slot_tokens;  // [B, streams·T]: x, then PREDICT × T if interleaved
  std::vector<int32_t> positions;    // [B, T] RoPE position, 0 at the first real token
  std::vector<int32_t> doc;          // [B, T] document id; each PAD its own (negative) id
  std::vector<int32_t> doc_start;    // [B, T] first token index of the token's document
  std::vector<uint8_t> keep;         // [B, T] loss term counts: x_i ∉ {EOS, PAD}
  int64_t kept = 0;                  // Σ keep

  int64_t slots() const { return streams * tokens; }
};

// Fills `layout` for tokens x [B, T]; reuses its storage (no allocation once sized).
void build_slot_layout(SlotLayout& layout, const int32_t* x, int64_t batch, int64_t tokens,
                       const ModelConfig& config, const Family& family);

}  // namespace sps

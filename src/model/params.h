#pragma once
// The parameters of every family: one flat buffer in the name order of docs/model.md §2, so a layer's
// gate_proj and up_proj are adjacent and act as one [2F, d] weight.
#include <cstdint>
#include <string>
#include <vector>

#include "model/config.h"

namespace sps {

struct ParamEntry {
  std::string name;            // docs/model.md §2 name, e.g. transformer.h.0.attn.c_attn.weight
  std::vector<int64_t> shape;  // row-major, [out, in] for linear weights
  int64_t offset = 0;          // into the flat buffer, in elements
  int64_t numel = 0;
  bool decayed = false;        // ≥ 2-D tensors get weight decay
};

struct LayerParams {  // offsets into the flat buffer
  int64_t attention_norm, c_attn, c_proj, mlp_norm;
  int64_t gate_up;  // [2F, d]: mlp.gate_proj.weight, then mlp.up_proj.weight
  int64_t down_proj;
};

class ParamTable {
 public:
  explicit ParamTable(const ModelConfig& config);

  const std::vector<ParamEntry>& entries() const { return entries_; }
  const ParamEntry* find(const std::string& name) const;
  int64_t total() const { return total_; }
  int64_t wte() const { return wte_; }
  int64_t output_norm() const { return output_norm_; }
  const LayerParams& layer(int64_t l) const { return layers_[l]; }

 private:
  int64_t add(const std::string& name, std::vector<int64_t> shape);
  std::vector<ParamEntry> entries_;
  std::vector<LayerParams> layers_;
  int64_t total_ = 0, wte_ = 0, output_norm_ = 0;
};

// docs/model.md §2 initialisation, deterministic in `seed`: every linear weight and the embedding
// ~ N(0, init_std), attention c_proj ~ N(0, init_std/√(2L)), norm gains 1. Each tensor
// draws from its own stream (seed, tensor index), so the result does not depend on threads.
template <typename T>
void init_parameters(T* weights, const ParamTable& table, const ModelConfig& config,
                     uint64_t seed);

}  // namespace sps

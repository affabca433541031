#include "model/params.h"

#include <cmath>

#include "util/rng.h"

namespace sps {

ParamTable::ParamTable(const ModelConfig& c) {
  const int64_t d = c.hidden_size, F = c.intermediate_size;
  wte_ = add("transformer.wte.weight", {c.vocab_size, d});
  for (int64_t l = 0; l < c.n_layer; ++l) {
    const std::string p = "transformer.h." + std::to_string(l) + ".";
    LayerParams lp;
    lp.attention_norm = add(p + "attention_norm.weight", {d});
    lp.c_attn = add(p + "attn.c_attn.weight", {3 * d, d});
    lp.c_proj = add(p + "attn.c_proj.weight", {d, d});
    lp.mlp_norm = add(p + "mlp_norm.weight", {d});
    lp.gate_up = add(p + "mlp.gate_proj.weight", {F, d});
    add(p + "mlp.up_proj.weight", {F, d});  // right after gate_proj: rows F..2F of gate_up
    lp.down_proj = add(p + "mlp.down_proj.weight", {d, F});
    layers_.push_back(lp);
  }
  output_norm_ = add("transformer.output_norm.weight", {d});
}

int64_t ParamTable::add(const std::string& name, std::vector<int64_t> shape) {
  ParamEntry e;
  e.name = name;
  e.numel = 1;
  for (int64_t s : shape) e.numel *= s;
  e.decayed = shape.size() >= 2;
  e.shape = std::move(shape);
  e.offset = total_;
  total_ += e.numel;
  entries_.push_back(std::move(e));
  return entries_.back().offset;
}

const ParamEntry* ParamTable::find(const std::string& name) const {
  for (const auto& e : entries_)
    if (e.name == name) return &e;
  return nullptr;
}

template <typename T>
void init_parameters(T* weights, const ParamTable& table, const ModelConfig& config,
                     uint64_t seed) {
  const double proj_std = config.init_std / std::sqrt(2.0 * double(config.n_layer));
  const auto& entries = table.entries();
#pragma omp parallel for schedule(dynamic)
  for (size_t i = 0; i < entries.size(); ++i) {
    const ParamEntry& e = entries[i];
    T* w = weights + e.offset;
    if (!e.decayed) {  // norm gains
      for (int64_t k = 0; k < e.numel; ++k) w[k] = T(1);
      continue;
    }
    const bool is_proj = e.name.ends_with("attn.c_proj.weight");
    const double stddev = is_proj ? proj_std : config.init_std;
    uint64_t mix = seed ^ (0xA0761D6478BD642Full * (i + 1));
    Rng rng(splitmix64(mix));
    for (int64_t k = 0; k < e.numel; ++k) w[k] = T(rng.normal() * stddev);
  }
}

template void init_parameters<float>(float*, const ParamTable&, const ModelConfig&, uint64_t);
template void init_parameters<double>(double*, const ParamTable&, const ModelConfig&, uint64_t);

}  // namespace sps

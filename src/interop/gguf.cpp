#include "interop/gguf.h"

#include <cmath>
#include <cstring>

#include "model/params.h"
#include "ops/weight_type.h"
#include "util/atomic_file.h"
#include "util/error.h"
#include "util/float_formats.h"

namespace sps {

namespace {

// Metadata and tensor infos go to one buffer; the tensor data streams after it.
class Buffer {
 public:
  void u32(uint32_t v) { raw(&v, 4); }
  void u64(uint64_t v) { raw(&v, 8); }
  void i32(int32_t v) { raw(&v, 4); }
  void f32(float v) { raw(&v, 4); }
  void str(const std::string& s) { u64(s.size()); raw(s.data(), s.size()); }
  void raw(const void* p, size_t n) { bytes.append(static_cast<const char*>(p), n); }

  void kv_u32(const std::string& key, uint32_t v) { str(key); u32(kGgufU32); u32(v); ++kv_count; }
  void kv_f32(const std::string& key, float v) { str(key); u32(kGgufF32); f32(v); ++kv_count; }
  void kv_bool(const std::string& key, bool v) { str(key); u32(kGgufBool); bytes += char(v ? 1 : 0); ++kv_count; }
  void kv_str(const std::string& key, const std::string& v) { str(key); u32(kGgufString); str(v); ++kv_count; }
  void kv_strings(const std::string& key, const std::vector<std::string>& v) {
    str(key); u32(kGgufArray); u32(kGgufString); u64(v.size());
    for (const auto& s : v) str(s);
    ++kv_count;
  }
  void kv_i32s(const std::string& key, const std::vector<int32_t>& v) {
    str(key); u32(kGgufArray); u32(kGgufI32); u64(v.size());
    for (int32_t x : v) i32(x);
    ++kv_count;
  }

  std::string bytes;
  uint64_t kv_count = 0;
};

struct OutTensor {
  std::string name;
  std::vector<int64_t> shape;  // row-major [out, in]
  const float* data;
  bool keep_f32;               // norms stay F32, as llama.cpp's own converter writes them
};

uint64_t padded(uint64_t n) { return (n + kGgufAlignment - 1) / kGgufAlignment * kGgufAlignment; }

}  // namespace

GgufType gguf_type_by_name(const std::string& name) {
  if (name == "f32") return GgufType::f32;
  if (name == "f16") return GgufType::f16;
  if (name == "bf16") return GgufType::bf16;
  if (name == "q8_0") return GgufType::q8_0;
  fail("--precision {}: expected f32, f16, bf16 or q8_0", name);
}

namespace {

uint32_t ggml_type(GgufType type) {
  switch (type) {
    case GgufType::f32: return kGgmlF32;
    case GgufType::f16: return kGgmlF16;
    case GgufType::bf16: return kGgmlBf16;
    case GgufType::q8_0: return kGgmlQ8_0;
  }
  return kGgmlF32;
}

// llama.cpp's general.file_type: ALL_F32, MOSTLY_F16, MOSTLY_Q8_0, MOSTLY_BF16.
uint32_t file_type(GgufType type) {
  switch (type) {
    case GgufType::f32: return 0;
    case GgufType::f16: return 1;
    case GgufType::bf16: return 32;
    case GgufType::q8_0: return 7;
  }
  return 0;
}

constexpr int64_t kQ8BlockBytes = 2 + ops::kQ8Block;  // fp16 scale, 32 int8

uint64_t tensor_bytes(uint32_t type, int64_t numel) {
  if (type == kGgmlQ8_0) return uint64_t(numel / ops::kQ8Block * kQ8BlockBytes);
  return uint64_t(numel) * (type == kGgmlF32 ? 4 : 2);
}

// numel values as `type` into out (tensor_bytes of them).
void encode(uint32_t type, const float* values, int64_t numel, const std::string& name, char* out) {
  if (type == kGgmlQ8_0) {
    for (int64_t b = 0; b < numel / ops::kQ8Block; ++b) {
      char* block = out + b * kQ8BlockBytes;
      int8_t q[ops::kQ8Block];
      const uint16_t scale = ops::quantize_q8_block(values + b * ops::kQ8Block, ops::kQ8Block, q, name);
      std::memcpy(block, &scale, 2);
      std::memcpy(block + 2, q, ops::kQ8Block);
    }
    return;
  }
  for (int64_t k = 0; k < numel; ++k) {
    if (type == kGgmlF32) {
      std::memcpy(out + 4 * k, &values[k], 4);
    } else {
      const uint16_t h = type == kGgmlF16 ? float_to_f16(values[k]) : float_to_bf16(values[k]);
      std::memcpy(out + 2 * k, &h, 2);
    }
  }
}

}  // namespace

void write_gguf(const std::string& path, const ModelConfig& c, const float* w,
                const ExportVocabulary& tokenizer, GgufType precision, const std::string& name) {
  if (c.family != "standard")
    fail("--to gguf: a {} model interleaves predict slots, which no runtime outside sps runs; "
         "only the standard family exports to GGUF",
         c.family);
  if (int64_t(tokenizer.tokens.size()) != c.vocab_size)
    fail("--to gguf: the tokenizer has {} entries, the model's vocabulary {}", tokenizer.tokens.size(), c.vocab_size);
  const ParamTable table(c);
  const int64_t d = c.hidden_size, F = c.intermediate_size;
  std::vector<OutTensor> tensors;
  tensors.push_back({"token_embd.weight", {c.vocab_size, d}, w + table.wte(), false});
  for (int64_t l = 0; l < c.n_layer; ++l) {
    const LayerParams& p = table.layer(l);
    const std::string b = "blk." + std::to_string(l) + ".";
    tensors.push_back({b + "attn_norm.weight", {d}, w + p.attention_norm, true});
    tensors.push_back({b + "attn_q.weight", {d, d}, w + p.c_attn, false});
    tensors.push_back({b + "attn_k.weight", {d, d}, w + p.c_attn + d * d, false});
    tensors.push_back({b + "attn_v.weight", {d, d}, w + p.c_attn + 2 * d * d, false});
    tensors.push_back({b + "attn_output.weight", {d, d}, w + p.c_proj, false});
    tensors.push_back({b + "ffn_norm.weight", {d}, w + p.mlp_norm, true});
    tensors.push_back({b + "ffn_gate.weight", {F, d}, w + p.gate_up, false});
    tensors.push_back({b + "ffn_up.weight", {F, d}, w + p.gate_up + F * d, false});
    tensors.push_back({b + "ffn_down.weight", {d, F}, w + p.down_proj, false});
  }
  tensors.push_back({"output_norm.weight", {d}, w + table.output_norm(), true});

  Buffer meta;
  meta.kv_str("general.architecture", "llama");
  meta.kv_str("general.name", name);
  meta.kv_u32("general.alignment", kGgufAlignment);
  meta.kv_u32("general.file_type", file_type(precision));
  meta.kv_u32("llama.context_length", uint32_t(c.block_size));
  meta.kv_u32("llama.embedding_length", uint32_t(d));
  meta.kv_u32("llama.block_count", uint32_t(c.n_layer));
  meta.kv_u32("llama.feed_forward_length", uint32_t(F));
  meta.kv_u32("llama.attention.head_count", uint32_t(c.n_head));
  meta.kv_u32("llama.attention.head_count_kv", uint32_t(c.n_head));
  meta.kv_u32("llama.rope.dimension_count", uint32_t(c.head_dim()));
  meta.kv_f32("llama.rope.freq_base", float(c.rope_theta));
  meta.kv_f32("llama.attention.layer_norm_rms_epsilon", float(c.norm_eps));
  meta.kv_u32("llama.vocab_size", uint32_t(c.vocab_size));
  meta.kv_str("tokenizer.ggml.model", "gpt2");
  meta.kv_str("tokenizer.ggml.pre", "gpt-2");
  meta.kv_strings("tokenizer.ggml.tokens", tokenizer.tokens);
  meta.kv_i32s("tokenizer.ggml.token_type", tokenizer.types);
  meta.kv_strings("tokenizer.ggml.merges", tokenizer.merges);
  meta.kv_u32("tokenizer.ggml.bos_token_id", tokenizer.eos_id);
  meta.kv_u32("tokenizer.ggml.eos_token_id", tokenizer.eos_id);
  meta.kv_bool("tokenizer.ggml.add_bos_token", false);

  Buffer infos;
  uint64_t offset = 0;
  std::vector<uint32_t> types;
  for (const OutTensor& t : tensors) {
    const uint32_t type = t.keep_f32 ? kGgmlF32 : ggml_type(precision);
    if (type == kGgmlQ8_0 && t.shape.back() % ops::kQ8Block != 0)
      fail("--precision q8_0: tensor {} has rows of {} values; Q8_0 needs a multiple of {}",
           t.name, t.shape.back(), ops::kQ8Block);
    types.push_back(type);
    infos.str(t.name);
    infos.u32(uint32_t(t.shape.size()));
    for (size_t i = t.shape.size(); i-- > 0;) infos.u64(uint64_t(t.shape[i]));  // innermost first
    infos.u32(type);
    infos.u64(offset);
    int64_t numel = 1;
    for (int64_t s : t.shape) numel *= s;
    offset = padded(offset + tensor_bytes(type, numel));
  }

  Buffer header;
  header.raw("GGUF", 4);
  header.u32(3);
  header.u64(tensors.size());
  header.u64(meta.kv_count);
  std::string head = header.bytes + meta.bytes + infos.bytes;
  head.resize(padded(head.size()), '\0');

  AtomicFile out(path);
  out.write(head.data(), head.size());
  std::vector<char> staged;
  for (size_t i = 0; i < tensors.size(); ++i) {
    const OutTensor& t = tensors[i];
    int64_t numel = 1;
    for (int64_t s : t.shape) numel *= s;
    staged.assign(padded(tensor_bytes(types[i], numel)), '\0');
    encode(types[i], t.data, numel, t.name, staged.data());
    out.write(staged.data(), staged.size());
  }
  out.commit();
}

}  // namespace sps

// GGUF export read back by a parser written here from the format's description (GGUF v3:
// header, typed key/values, tensor infos, aligned data), independent of the exporter.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <map>
#include <nlohmann/json.hpp>
#include <variant>

#include "float_reference.h"
#include "interop/gguf.h"
#include "interop/reference_checkpoint.h"
#include "interop_fixtures.h"
#include "model/params.h"
#include "util/error.h"
#include "util/float_formats.h"
#include "util/temp_dir.h"

namespace sps {
namespace {

using testing::fixture_vocabulary;
using testing::interop_fixture;

// --- An independent GGUF reader ----------------------------------------------------------

struct GgufValue {
  uint32_t type = 0;
  uint64_t u = 0;           // unsigned and bool
  int64_t i = 0;            // signed
  double f = 0;             // floats
  std::string s;
  uint32_t array_type = 0;
  std::vector<GgufValue> array;
};

struct GgufTensorInfo {
  std::vector<uint64_t> dims;  // innermost first
  uint32_t type = 0;
  uint64_t offset = 0;
};

struct GgufFile {
  uint32_t version = 0;
  std::vector<std::string> key_order;
  std::map<std::string, GgufValue> kv;
  std::vector<std::string> tensor_order;
  std::map<std::string, GgufTensorInfo> tensors;
  uint64_t data_start = 0;
  std::string bytes;
};

class Cursor {
 public:
  explicit Cursor(const std::string& b) : b_(b) {}
  template <typename T>
  T get() {
    if (pos_ + sizeof(T) > b_.size()) throw std::runtime_error("GGUF read past the end");
    T v;
    std::memcpy(&v, b_.data() + pos_, sizeof(T));
    pos_ += sizeof(T);
    return v;
  }
  std::string str() {
    const uint64_t n = get<uint64_t>();
    if (pos_ + n > b_.size()) throw std::runtime_error("GGUF string past the end");
    std::string s = b_.substr(pos_, n);
    pos_ += n;
    return s;
  }
  GgufValue value(uint32_t type) {
    GgufValue v;
    v.type = type;
    switch (type) {
      case 0: v.u = get<uint8_t>(); break;
      case 1: v.i = get<int8_t>(); break;
      case 2: v.u = get<uint16_t>(); break;
      case 3: v.i = get<int16_t>(); break;
      case 4: v.u = get<uint32_t>(); break;
      case 5: v.i = get<int32_t>(); break;
      case 6: v.f = get<float>(); break;
      case 7: v.u = get<uint8_t>(); break;
      case 8: v.s = str(); break;
      case 9: {
        v.array_type = get<uint32_t>();
        const uint64_t n = get<uint64_t>();
        for (uint64_t k = 0; k < n; ++k) v.array.push_back(value(v.array_type));
        break;
      }
      case 10: v.u = get<uint64_t>(); break;
      case 11: v.i = get<int64_t>(); break;
      case 12: v.f = get<double>(); break;
      default: throw std::runtime_error("GGUF: unknown value type " + std::to_string(type));
    }
    return v;
  }
  size_t pos() const { return pos_; }

 private:
  const std::string& b_;
  size_t pos_ = 0;
};

GgufFile read_gguf(const std::string& path) {
  GgufFile f;
  f.bytes = testing::read_whole_file(path);
  Cursor c(f.bytes);
  if (f.bytes.substr(0, 4) != "GGUF") throw std::runtime_error("no GGUF magic");
  c.get<uint32_t>();
  f.version = c.get<uint32_t>();
  const uint64_t n_tensors = c.get<uint64_t>(), n_kv = c.get<uint64_t>();
  for (uint64_t k = 0; k < n_kv; ++k) {
    const std::string key = c.str();
    const uint32_t type = c.get<uint32_t>();
    f.key_order.push_back(key);
    f.kv[key] = c.value(type);
  }
  for (uint64_t k = 0; k < n_tensors; ++k) {
    const std::string name = c.str();
    GgufTensorInfo t;
    const uint32_t n_dims = c.get<uint32_t>();
    for (uint32_t d = 0; d < n_dims; ++d) t.dims.push_back(c.get<uint64_t>());
    t.type = c.get<uint32_t>();
    t.offset = c.get<uint64_t>();
    f.tensor_order.push_back(name);
    f.tensors[name] = t;
  }
  uint64_t alignment = 32;
  if (f.kv.count("general.alignment")) alignment = f.kv["general.alignment"].u;
  f.data_start = (c.pos() + alignment - 1) / alignment * alignment;
  return f;
}

float read_element(const GgufFile& f, const GgufTensorInfo& t, uint64_t k) {
  const char* p = f.bytes.data() + f.data_start + t.offset;
  if (t.type == 0) {
    float v;
    std::memcpy(&v, p + 4 * k, 4);
    return v;
  }
  uint16_t h;
  std::memcpy(&h, p + 2 * k, 2);
  if (t.type == 30) {
    const uint32_t bits = uint32_t(h) << 16;
    float v;
    std::memcpy(&v, &bits, 4);
    return v;
  }
  // IEEE half
  const int e = (h >> 10) & 0x1F, m = h & 0x3FF;
  const float mag = e == 0 ? std::ldexp(float(m), -24) : std::ldexp(float(m | 0x400), e - 25);
  return (h & 0x8000) ? -mag : mag;
}

// --- Fixtures ----------------------------------------------------------------------------


TEST(Gguf, EveryKeyTensorShapeAndOffset) {
  testing::TempDir dir;
  const ImportedCheckpoint ckpt = import_reference_checkpoint(interop_fixture("standard_fp32_plain.pt"), {});
  const ExportVocabulary tok = fixture_vocabulary();
  const std::string path = dir.file("model.gguf");
  write_gguf(path, ckpt.config, ckpt.weights.data(), tok, GgufType::f32, "fixture");
  const GgufFile f = read_gguf(path);

  EXPECT_EQ(f.version, 3u);
  const std::vector<std::string> keys = {
      "general.architecture", "general.name", "general.alignment", "general.file_type",
      "llama.context_length", "llama.embedding_length", "llama.block_count",
      "llama.feed_forward_length", "llama.attention.head_count", "llama.attention.head_count_kv",
      "llama.rope.dimension_count", "llama.rope.freq_base", "llama.attention.layer_norm_rms_epsilon",
      "llama.vocab_size", "tokenizer.ggml.model", "tokenizer.ggml.pre", "tokenizer.ggml.tokens",
      "tokenizer.ggml.token_type", "tokenizer.ggml.merges", "tokenizer.ggml.bos_token_id",
      "tokenizer.ggml.eos_token_id", "tokenizer.ggml.add_bos_token"};
  EXPECT_EQ(f.key_order, keys);
  auto kv = [&](const std::string& k) -> const GgufValue& { return f.kv.at(k); };
  EXPECT_EQ(kv("general.architecture").s, "llama");
  EXPECT_EQ(kv("general.name").s, "fixture");
  EXPECT_EQ(kv("general.alignment").u, 32u);
  EXPECT_EQ(kv("general.file_type").u, 0u);
  EXPECT_EQ(kv("llama.context_length").u, 8u);
  EXPECT_EQ(kv("llama.embedding_length").u, 8u);
  EXPECT_EQ(kv("llama.block_count").u, 2u);
  EXPECT_EQ(kv("llama.feed_forward_length").u, 16u);
  EXPECT_EQ(kv("llama.attention.head_count").u, 2u);
  EXPECT_EQ(kv("llama.attention.head_count_kv").u, 2u);
  EXPECT_EQ(kv("llama.rope.dimension_count").u, 4u);
  EXPECT_EQ(kv("llama.rope.freq_base").type, 6u);
  EXPECT_EQ(kv("llama.rope.freq_base").f, 10000.0);
  EXPECT_FLOAT_EQ(kv("llama.attention.layer_norm_rms_epsilon").f, 1e-6f);
  EXPECT_EQ(kv("llama.vocab_size").u, 64u);
  EXPECT_EQ(kv("tokenizer.ggml.model").s, "gpt2");
  EXPECT_EQ(kv("tokenizer.ggml.pre").s, "gpt-2");
  const auto& tokens = kv("tokenizer.ggml.tokens").array;
  ASSERT_EQ(tokens.size(), 64u);
  EXPECT_EQ(tokens[0].s, "A");
  EXPECT_EQ(tokens[61].s, "<|endoftext|>");
  EXPECT_EQ(tokens[63].s, "[PAD63]");
  const auto& types = kv("tokenizer.ggml.token_type").array;
  ASSERT_EQ(types.size(), 64u);
  EXPECT_EQ(types[0].i, 1);
  EXPECT_EQ(types[61].i, 3);
  EXPECT_EQ(types[62].i, 5);
  const auto& merges = kv("tokenizer.ggml.merges").array;
  ASSERT_EQ(merges.size(), 2u);
  EXPECT_EQ(merges[1].s, "AB C");
  EXPECT_EQ(kv("tokenizer.ggml.bos_token_id").u, 61u);
  EXPECT_EQ(kv("tokenizer.ggml.eos_token_id").u, 61u);
  EXPECT_EQ(kv("tokenizer.ggml.add_bos_token").type, 7u);
  EXPECT_EQ(kv("tokenizer.ggml.add_bos_token").u, 0u);

  // Tensors: llama.cpp's names, dims innermost first, offsets aligned and back to back.
  std::vector<std::string> names = {"token_embd.weight"};
  for (int l = 0; l < 2; ++l)
    for (const char* n : {"attn_norm", "attn_q", "attn_k", "attn_v", "attn_output", "ffn_norm",
                          "ffn_gate", "ffn_up", "ffn_down"})
      names.push_back("blk." + std::to_string(l) + "." + n + ".weight");
  names.push_back("output_norm.weight");
  EXPECT_EQ(f.tensor_order, names);
  EXPECT_EQ(f.tensors.count("output.weight"), 0u);  // tied head
  uint64_t expected_offset = 0;
  for (const std::string& name : f.tensor_order) {
    const GgufTensorInfo& t = f.tensors.at(name);
    EXPECT_EQ(t.type, 0u) << name;
    EXPECT_EQ(t.offset, expected_offset) << name;
    uint64_t numel = 1;
    for (uint64_t d : t.dims) numel *= d;
    expected_offset = (t.offset + 4 * numel + 31) / 32 * 32;
  }
  EXPECT_EQ(f.data_start % 32, 0u);
  EXPECT_EQ(f.bytes.size(), f.data_start + expected_offset);
  EXPECT_EQ(f.tensors.at("token_embd.weight").dims, (std::vector<uint64_t>{8, 64}));
  EXPECT_EQ(f.tensors.at("blk.0.attn_k.weight").dims, (std::vector<uint64_t>{8, 8}));
  EXPECT_EQ(f.tensors.at("blk.1.ffn_gate.weight").dims, (std::vector<uint64_t>{8, 16}));
  EXPECT_EQ(f.tensors.at("blk.1.ffn_down.weight").dims, (std::vector<uint64_t>{16, 8}));
  EXPECT_EQ(f.tensors.at("output_norm.weight").dims, (std::vector<uint64_t>{8}));

  // Values: q, k, v are c_attn's row blocks as they are (adjacent-pair RoPE is llama.cpp's
  // normal rope), every other tensor is the parameter itself.
  const ParamTable table(ckpt.config);
  const float* w = ckpt.weights.data();
  auto expect_tensor = [&](const std::string& name, const float* want, uint64_t numel) {
    const GgufTensorInfo& t = f.tensors.at(name);
    for (uint64_t k = 0; k < numel; ++k) ASSERT_EQ(read_element(f, t, k), want[k]) << name << " " << k;
  };
  expect_tensor("token_embd.weight", w + table.wte(), 64 * 8);
  expect_tensor("blk.1.attn_q.weight", w + table.layer(1).c_attn, 64);
  expect_tensor("blk.1.attn_k.weight", w + table.layer(1).c_attn + 64, 64);
  expect_tensor("blk.1.attn_v.weight", w + table.layer(1).c_attn + 128, 64);
  expect_tensor("blk.0.attn_output.weight", w + table.layer(0).c_proj, 64);
  expect_tensor("blk.0.attn_norm.weight", w + table.layer(0).attention_norm, 8);
  expect_tensor("blk.0.ffn_norm.weight", w + table.layer(0).mlp_norm, 8);
  expect_tensor("blk.1.ffn_gate.weight", w + table.find("transformer.h.1.mlp.gate_proj.weight")->offset, 128);
  expect_tensor("blk.1.ffn_up.weight", w + table.find("transformer.h.1.mlp.up_proj.weight")->offset, 128);
  expect_tensor("blk.1.ffn_down.weight", w + table.layer(1).down_proj, 128);
  expect_tensor("output_norm.weight", w + table.output_norm(), 8);
}

TEST(Gguf, HalfPrecisionsKeepNormsInF32) {
  testing::TempDir dir;
  const ImportedCheckpoint ckpt = import_reference_checkpoint(interop_fixture("standard_bf16_plain.pt"), {});
  const ExportVocabulary tok = fixture_vocabulary();
  const ParamTable table(ckpt.config);
  for (const auto& [precision, type, file_type] :
       std::vector<std::tuple<GgufType, uint32_t, uint64_t>>{{GgufType::f16, 1, 1}, {GgufType::bf16, 30, 32}}) {
    const std::string path = dir.file("model.gguf");
    write_gguf(path, ckpt.config, ckpt.weights.data(), tok, precision, "fixture");
    const GgufFile f = read_gguf(path);
    EXPECT_EQ(f.kv.at("general.file_type").u, file_type);
    EXPECT_EQ(f.tensors.at("token_embd.weight").type, type);
    EXPECT_EQ(f.tensors.at("blk.0.ffn_up.weight").type, type);
    EXPECT_EQ(f.tensors.at("blk.0.attn_norm.weight").type, 0u);
    EXPECT_EQ(f.tensors.at("output_norm.weight").type, 0u);
    // The fixture's weights are exact in bf16; in f16 they are within half an f16 ulp.
    const GgufTensorInfo& t = f.tensors.at("token_embd.weight");
    for (uint64_t k = 0; k < 64 * 8; ++k) {
      const float want = ckpt.weights[size_t(table.wte() + int64_t(k))];
      const float got = read_element(f, t, k);
      if (precision == GgufType::bf16) {
        ASSERT_EQ(got, want) << k;
      } else {
        ASSERT_NEAR(got, want, std::abs(want) * (1.0 / 2048) + 1e-7) << k;
      }
    }
  }
}

// Q8_0: every 2-D weight in blocks of 32 along its rows (an fp16 scale, 32 int8), decoded here
// to the values of the independent reference (float_reference.h), which are the weights
// `--weight-type int8` multiplies; norms stay F32; rows not a multiple of 32 are refused.
TEST(Gguf, Q8_0BlocksDecodeToTheReferenceValues) {
  testing::TempDir dir;
  const ImportedCheckpoint ckpt = import_reference_checkpoint(interop_fixture("standard_fp32_plain.pt"), {});
  const ExportVocabulary tok = fixture_vocabulary();
  try {  // the fixture's d = 8
    write_gguf(dir.file("x.gguf"), ckpt.config, ckpt.weights.data(), tok, GgufType::q8_0, "x");
    FAIL() << "no error";
  } catch (const UserError& e) {
    EXPECT_NE(std::string(e.what()).find("Q8_0 needs a multiple of 32"), std::string::npos) << e.what();
  }
  EXPECT_EQ(dir.entries(), 0u);

  ModelConfig c = ckpt.config;
  c.hidden_size = 64;
  c.intermediate_size = 96;
  const ParamTable table(c);
  std::vector<float> w(size_t(table.total()));
  init_parameters(w.data(), table, c, 3);
  const std::string path = dir.file("model.gguf");
  write_gguf(path, c, w.data(), tok, GgufType::q8_0, "q8");
  const GgufFile f = read_gguf(path);
  EXPECT_EQ(f.kv.at("general.file_type").u, 7u);
  EXPECT_EQ(f.tensors.at("blk.0.attn_norm.weight").type, 0u);
  const auto expect_q8 = [&](const std::string& name, const float* values, int64_t rows, int64_t cols) {
    const GgufTensorInfo& t = f.tensors.at(name);
    ASSERT_EQ(t.type, 8u) << name;
    const char* data = f.bytes.data() + f.data_start + t.offset;
    for (int64_t r = 0; r < rows; ++r) {
      const std::vector<double> want = testing::reference_q8_row(values + r * cols, cols);
      for (int64_t k = 0; k < cols; ++k) {
        const char* block = data + (r * cols + k) / 32 * 34;
        uint16_t scale;
        std::memcpy(&scale, block, 2);
        const int8_t q = int8_t(block[2 + k % 32]);
        ASSERT_EQ(double(q) * testing::reference_f16(f16_to_float(scale)), want[k]) << name << " " << r << "," << k;
      }
    }
  };
  const int64_t d = c.hidden_size, F = c.intermediate_size;
  const LayerParams& p = table.layer(1);
  expect_q8("token_embd.weight", w.data() + table.wte(), c.vocab_size, d);
  expect_q8("blk.1.attn_k.weight", w.data() + p.c_attn + d * d, d, d);
  expect_q8("blk.1.ffn_up.weight", w.data() + p.gate_up + F * d, F, d);
  expect_q8("blk.1.ffn_down.weight", w.data() + p.down_proj, d, F);
}

TEST(Gguf, InterleavedFamiliesAreRefused) {
  testing::TempDir dir;
  const ImportedCheckpoint ckpt = import_reference_checkpoint(interop_fixture("sps_fp32_plain.pt"), {});
  const ExportVocabulary tok = fixture_vocabulary();
  try {
    write_gguf(dir.file("x.gguf"), ckpt.config, ckpt.weights.data(), tok, GgufType::f32, "x");
    FAIL() << "no error";
  } catch (const UserError& e) {
    EXPECT_NE(std::string(e.what()).find("only the standard family exports to GGUF"), std::string::npos);
  }
  EXPECT_EQ(dir.entries(), 0u);
}

}  // namespace
}  // namespace sps

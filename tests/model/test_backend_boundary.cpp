// The backend boundary: the model and the optimizer hand the backend's ops nothing but
// memory that backend allocated (a GPU backend could not read a host array), and a step
// through it is the CPU backend's step. A checking backend wraps the CPU one and records
// every pointer an op or a copy receives that lies outside its allocations.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "model/backend_lockstep.h"
#include "model/flops.h"
#include "ops/attention_plan.h"
#include "ops/decode_keys.h"
#include "train/optimizer.h"
#include "util/temp_dir.h"

namespace sps {
namespace {

class CheckingBackend final : public ops::Backend<float> {
 public:
  mutable std::vector<std::string> strays;  // "op: argument" for each pointer outside
  mutable int64_t calls = 0;
  mutable double decode_linear_flops = 0;  // 2·rows·in·out of every decode or packed linear
  mutable int64_t decode_pairs = 0;        // what attention_decode returned, summed

  ops::Device device() const override { return {}; }
  bool host_accessible() const override { return false; }  // take the staging paths too
  // Asks for a tile plan, as a GPU backend does, and checks the one each attention receives.
  int64_t attention_tile() const override { return kTile; }
  void* allocate(size_t bytes) const override {
    void* p = cpu().allocate(bytes);
    allocations_[static_cast<const char*>(p)] = bytes;
    return p;
  }
  int64_t available_bytes() const override { return cpu().available_bytes(); }
  void release(void* p) const override {
    allocations_.erase(static_cast<const char*>(p));
    cpu().release(p);
  }
  void copy(void* to, const void* from, size_t bytes) const override {
    check("copy", {to, from});
    cpu().copy(to, from, bytes);
  }
  void upload(void* to, const void* host, size_t bytes) const override {
    check("upload", {to});
    cpu().upload(to, host, bytes);
  }
  void download(void* host, const void* from, size_t bytes) const override {
    check("download", {from});
    cpu().download(host, from, bytes);
  }
  void fill(float* x, int64_t n, float value) const override {
    check("fill", {x});
    cpu().fill(x, n, value);
  }
  void linear_forward(float* out, const float* in, const float* w, int64_t rows, int64_t in_dim,
                      int64_t out_dim, bool accumulate, int64_t ld_in,
                      int64_t ld_out) const override {
    check("linear_forward", {out, in, w});
    cpu().linear_forward(out, in, w, rows, in_dim, out_dim, accumulate, ld_in, ld_out);
  }
  void linear_backward(float* din, float* dw, const float* dout, const float* in, const float* w,
                       int64_t rows, int64_t in_dim, int64_t out_dim, bool accumulate_din,
                       int64_t ld_in, int64_t ld_dout) const override {
    check("linear_backward", {din, dw, dout, in, w});
    cpu().linear_backward(din, dw, dout, in, w, rows, in_dim, out_dim, accumulate_din, ld_in,
                          ld_dout);
  }
  void linear_decode_forward(float* out, const float* in, const float* w, int64_t rows,
                             int64_t in_dim, int64_t out_dim, bool accumulate) const override {
    check("linear_decode_forward", {out, in, w});
    decode_linear_flops += 2.0 * double(rows) * double(in_dim) * double(out_dim);
    cpu().linear_decode_forward(out, in, w, rows, in_dim, out_dim, accumulate);
  }
  bool pack_linear_weight(float* w, int64_t in_dim, int64_t out_dim) const override {
    check("pack_linear_weight", {w});
    return cpu().pack_linear_weight(w, in_dim, out_dim);
  }
  void linear_packed_forward(float* out, const float* in, const float* w, int64_t rows,
                             int64_t in_dim, int64_t out_dim, bool accumulate) const override {
    check("linear_packed_forward", {out, in, w});
    decode_linear_flops += 2.0 * double(rows) * double(in_dim) * double(out_dim);
    cpu().linear_packed_forward(out, in, w, rows, in_dim, out_dim, accumulate);
  }
  void embedding_forward(float* out, const int32_t* tokens, const float* table, int64_t n,
                         int64_t d) const override {
    check("embedding_forward", {out, tokens, table});
    cpu().embedding_forward(out, tokens, table, n, d);
  }
  void embedding_backward(float* dtable, const float* dout, const int32_t* tokens, int64_t n,
                          int64_t d) const override {
    check("embedding_backward", {dtable, dout, tokens});
    cpu().embedding_backward(dtable, dout, tokens, n, d);
  }
  void rmsnorm_forward(float* out, float* rstd, const float* in, const float* gain, int64_t rows,
                       int64_t d, double eps) const override {
    check("rmsnorm_forward", {out, rstd, in, gain});
    cpu().rmsnorm_forward(out, rstd, in, gain, rows, d, eps);
  }
  void rmsnorm_backward(float* din, float* dgain, const float* dout, const float* in,
                        const float* gain, const float* rstd, int64_t rows,
                        int64_t d) const override {
    check("rmsnorm_backward", {din, dgain, dout, in, gain, rstd});
    cpu().rmsnorm_backward(din, dgain, dout, in, gain, rstd, rows, d);
  }
  void rope_forward(float* x, const int32_t* pos, int64_t n, int64_t heads, int64_t head_dim,
                    int64_t row_stride, const float* cos_table,
                    const float* sin_table) const override {
    check("rope_forward", {x, pos, cos_table, sin_table});
    cpu().rope_forward(x, pos, n, heads, head_dim, row_stride, cos_table, sin_table);
  }
  void rope_backward(float* dx, const int32_t* pos, int64_t n, int64_t heads, int64_t head_dim,
                     int64_t row_stride, const float* cos_table,
                     const float* sin_table) const override {
    check("rope_backward", {dx, pos, cos_table, sin_table});
    cpu().rope_backward(dx, pos, n, heads, head_dim, row_stride, cos_table, sin_table);
  }
  void swiglu_forward(float* act, const float* gate_up, int64_t rows, int64_t F) const override {
    check("swiglu_forward", {act, gate_up});
    cpu().swiglu_forward(act, gate_up, rows, F);
  }
  void swiglu_backward(float* dgate_up, const float* dact, const float* gate_up, int64_t rows,
                       int64_t F) const override {
    check("swiglu_backward", {dgate_up, dact, gate_up});
    cpu().swiglu_backward(dgate_up, dact, gate_up, rows, F);
  }
  void cross_entropy_forward(float* nll, float* lse, const float* logits, const int32_t* targets,
                             int64_t rows, int64_t V) const override {
    check("cross_entropy_forward", {nll, lse, logits, targets});
    cpu().cross_entropy_forward(nll, lse, logits, targets, rows, V);
  }
  void argmax_rows(int32_t* ids, const float* x, int64_t rows, int64_t n,
                   const ops::ExcludedIds& excluded) const override {
    check("argmax_rows", {ids, x});
    cpu().argmax_rows(ids, x, rows, n, excluded);
  }
  void cross_entropy_backward(float* dlogits, const float* logits, const float* lse,
                              const int32_t* targets, const float* dnll, int64_t rows,
                              int64_t V) const override {
    check("cross_entropy_backward", {dlogits, logits, lse, targets, dnll});
    cpu().cross_entropy_backward(dlogits, logits, lse, targets, dnll, rows, V);
  }
  int64_t attention_forward(float* out, float* lse, const float* qkv,
                            const ops::AttentionLayout& layout) const override {
    check("attention_forward", {out, lse, qkv, layout.doc, layout.doc_start, layout.tile_kinds});
    check_tile_plan("attention_forward", layout);
    return cpu().attention_forward(out, lse, qkv, layout);
  }
  void attention_backward(float* dqkv, const float* dout, const float* qkv, const float* out,
                          const float* lse, const ops::AttentionLayout& layout) const override {
    check("attention_backward",
          {dqkv, dout, qkv, out, lse, layout.doc, layout.doc_start, layout.tile_kinds});
    check_tile_plan("attention_backward", layout);
    cpu().attention_backward(dqkv, dout, qkv, out, lse, layout);
  }
  void attention_decode(float* out, const float* qkv, const float* pk, const float* pv,
                        const float* rk, const float* rv,
                        const ops::DecodeAttentionLayout& layout) const override {
    check("attention_decode", {out, qkv, pk, pv, rk, rv, layout.persistent_end, layout.ring_len,
                               layout.ring_next});
    decode_pairs += ops::decode_attention_pairs(layout);  // its own memory is host memory
    cpu().attention_decode(out, qkv, pk, pv, rk, rv, layout);
  }
  void adamw_update(float* w, const float* g, float* m, float* v,
                    const std::vector<ops::AdamWRange>& ranges,
                    const ops::AdamWStep& step) const override {
    check("adamw_update", {w, g, m, v});
    cpu().adamw_update(w, g, m, v, ranges, step);
  }
  double sum_squares(const float* x, int64_t n) const override {
    check("sum_squares", {x});
    return cpu().sum_squares(x, n);
  }

 private:
  static const ops::Backend<float>& cpu() { return ops::cpu_backend<float>(); }
  bool owned(const void* p) const {
    const char* c = static_cast<const char*>(p);
    auto it = allocations_.upper_bound(c);
    if (it == allocations_.begin()) return false;
    --it;
    return c < it->first + it->second;
  }
  static constexpr int64_t kTile = 16;
  // The layout's tile plan is the plan of its own doc and doc_start arrays (this backend's
  // memory is host memory underneath), with its pair count.
  void check_tile_plan(const char* op, const ops::AttentionLayout& layout) const {
    ops::AttentionTilePlan expected;
    ops::plan_attention_tiles(expected, layout, kTile, kTile);
    const bool same = layout.tile_kinds && layout.tile == kTile &&
                      layout.tile_pairs == expected.computed_pairs &&
                      std::equal(expected.kinds.begin(), expected.kinds.end(), layout.tile_kinds);
    if (!same) strays.push_back(std::string(op) + ": tile plan");
  }
  void check(const char* op, std::initializer_list<const void*> pointers) const {
    ++calls;
    int k = 0;
    for (const void* p : pointers) {
      if (p && !owned(p)) strays.push_back(std::string(op) + ": argument " + std::to_string(k));
      ++k;
    }
  }
  mutable std::map<const char*, size_t> allocations_;
};

// Training steps and a scoring forward on the checking backend and on the CPU backend, for
// every family, with and without recomputation: the same bits, and no stray pointer.
void bitwise_equal(const std::string& what, const std::vector<double>& a,
                   const std::vector<double>& b) {
  EXPECT_EQ(a, b) << what;
}

TEST(BackendBoundary, TrainingStepsPassOnlyTheBackendsMemoryAndMatchTheCpu) {
  for (const std::string& family : testing::kFamilies) {
    for (const bool recompute : {false, true}) {
      SCOPED_TRACE(family + (recompute ? ", recomputed" : ""));
      const CheckingBackend checking;
      testing::train_in_lockstep(testing::micro_config(family, 3), checking, recompute,
                                 bitwise_equal);
      EXPECT_GT(checking.calls, 0);
      EXPECT_EQ(checking.strays, std::vector<std::string>{});
    }
  }
}

// The optimizer's moments cross to and from a file through host copies when the backend's
// memory is not the host's.
TEST(BackendBoundary, OptimizerStateRoundTripsThroughHostCopies) {
  const ModelConfig c = testing::micro_config("sps", 2);
  const ParamTable table(c);
  const CheckingBackend checking;
  const int64_t P = table.total();
  ops::DeviceBuffer<float> w(checking), g(checking);
  std::vector<float> host_g(P);
  for (int64_t i = 0; i < P; ++i) host_g[i] = float(i % 5) - 2.0f;
  const std::vector<float> host_w(P, 0.25f);
  w.upload(host_w.data(), P);
  g.upload(host_g.data(), P);
  AdamW a(table, OptimizerSettings{}, checking);
  a.update(checking, w.data(), g.data(), 1e-3, 1.0);
  testing::TempDir dir;
  a.save(dir.file("optimizer.safetensors"));
  AdamW b(table, OptimizerSettings{}, checking);
  b.load(dir.file("optimizer.safetensors"));
  EXPECT_EQ(b.step(), 1);
  std::vector<float> m_a(P), m_b(P);
  checking.download(m_a.data(), a.exp_avg_sq(), P * sizeof(float));
  checking.download(m_b.data(), b.exp_avg_sq(), P * sizeof(float));
  EXPECT_EQ(m_a, m_b);
  EXPECT_NE(m_a, std::vector<float>(P, 0.0f));
  EXPECT_EQ(checking.strays, std::vector<std::string>{});
}

// Cached generation on the checking backend (its logits reach the host through copies):
// the CPU decoder's logits, and every op sees only the backend's memory.
TEST(BackendBoundary, CachedGenerationPassesOnlyTheBackendsMemoryAndMatchesTheCpu) {
  for (const std::string& family : testing::kFamilies) {
    SCOPED_TRACE(family);
    const CheckingBackend checking;
    testing::decode_in_lockstep(testing::micro_config(family, 2), checking, bitwise_equal);
    EXPECT_GT(checking.calls, 0);
    EXPECT_EQ(checking.strays, std::vector<std::string>{});
  }
}

// Three rows of prompts of 6 tokens, then 4 steps: the decoders of the tests below.
DecoderShape three_rows() {
  DecoderShape shape;
  shape.batch = 3;
  shape.max_prompt_tokens = 6;
  shape.max_new_tokens = 4;
  return shape;
}

// Greedy choices made where the logits are, with no logits kept on the host, are those of
// the host logits of a CPU decoder on the same weights, step after step.
TEST(BackendBoundary, GreedyChoicesWithoutHostLogitsMatchTheCpu) {
  for (const std::string& family : testing::kFamilies) {
    SCOPED_TRACE(family);
    const ModelConfig c = testing::micro_config(family, 2);
    const CheckingBackend checking;
    Model<float> on_device(c, checking), on_cpu(c);
    on_device.init_weights(3);
    on_cpu.init_weights(3);
    DecoderShape shape = three_rows();
    Decoder<float> reference(on_cpu, shape);
    shape.host_logits = false;
    Decoder<float> decoder(on_device, shape);
    const std::vector<int32_t> prompts = testing::random_tokens(3, 6, c, 5, {});
    reference.prefill(prompts.data(), 6);
    decoder.prefill(prompts.data(), 6);
    ops::ExcludedIds excluded;
    excluded.ids[0] = c.eos_token_id;
    excluded.ids[1] = c.predict_token_id;
    for (int step = 0; step < 4; ++step) {
      std::vector<int32_t> expected(3), chosen(3, -7);
      for (int64_t b = 0; b < 3; ++b) {
        const float* row = reference.logits() + b * c.vocab_size;
        int32_t best = -1;
        for (int32_t id = 0; id < int32_t(c.vocab_size); ++id)
          if (id != c.eos_token_id && id != c.predict_token_id && (best < 0 || row[id] > row[best]))
            best = id;
        expected[b] = best;
      }
      decoder.greedy(chosen.data(), excluded);
      EXPECT_EQ(chosen, expected) << "step " << step;
      reference.step(expected.data());
      decoder.step(chosen.data());
    }
    EXPECT_EQ(checking.strays, std::vector<std::string>{});
  }
}

// The FLOPs `sps bench generate` holds decode against (model/flops.h) are those the decoder's
// ops are asked for in a step: every projection, the LM head and 4·D per attention pair.
TEST(BackendBoundary, DecodeStepFlopsAreTheDecodersOps) {
  for (const std::string& family : testing::kFamilies) {
    SCOPED_TRACE(family);
    const ModelConfig c = testing::micro_config(family, 2);
    const CheckingBackend checking;
    Model<float> model(c, checking);
    model.init_weights(3);
    DecoderShape shape = three_rows();
    Decoder<float> decoder(model, shape);
    const std::vector<int32_t> prompts = testing::random_tokens(3, 6, c, 5, {});
    decoder.prefill(prompts.data(), 6);
    for (int32_t token = 1; token < 4; ++token) {
      checking.decode_linear_flops = 0;
      checking.decode_pairs = 0;
      const std::vector<int32_t> step = {token, token + 1, token + 2};
      decoder.step(step.data());
      EXPECT_EQ(checking.decode_pairs, decoder.last_step_attention_pairs());
      EXPECT_GT(checking.decode_pairs, 0);
      EXPECT_DOUBLE_EQ(decode_step_flops(c, 3, double(checking.decode_pairs)),
                       checking.decode_linear_flops +
                           4.0 * double(c.head_dim()) * double(checking.decode_pairs));
    }
  }
}

}  // namespace
}  // namespace sps

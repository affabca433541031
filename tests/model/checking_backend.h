#pragma once
// A backend for tests of the backend boundary: it wraps the CPU backend and records every
// pointer an op or a copy receives that lies outside its own allocations (a GPU backend
// could not read a host array), and every call from a thread that did not select it.
#include <algorithm>
#include <cstdint>
#include <map>
#include <mutex>
#include <optional>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "ops/attention_plan.h"
#include "ops/backend.h"
#include "ops/decode_keys.h"
#include "ops/token_rows.h"

namespace sps::testing {

class CheckingBackend final : public ops::Backend<float> {
 public:
  // "op: argument" for each pointer outside, "op: thread" for each call from a thread that
  // did not say use_on_this_thread (a GPU's current device is the calling thread's).
  mutable std::vector<std::string> strays;
  mutable int64_t calls = 0;
  mutable double decode_linear_flops = 0;  // 2·rows·in·out of every decode or packed linear
  mutable int64_t decode_pairs = 0;        // what attention_decode returned, summed
  mutable int64_t largest_download = 0;    // bytes
  mutable int64_t downloads = 0;

  ops::Device device() const override { return {}; }
  void use_on_this_thread() const override {
    std::lock_guard lock(mutex_);
    threads_.insert(std::this_thread::get_id());
  }
  bool host_accessible() const override { return false; }  // take the staging paths too
  // Asks for a tile plan, as a GPU backend does, and checks the one each attention receives.
  int64_t attention_tile() const override { return kTile; }
  void* allocate(size_t bytes) const override {
    check("allocate", {});
    void* p = cpu().allocate(bytes);
    std::lock_guard lock(mutex_);
    allocations_[static_cast<const char*>(p)] = bytes;
    return p;
  }
  // The memory it reports: the host's unless a test sets a figure.
  std::optional<int64_t> available;
  int64_t available_bytes() const override {
    return available ? *available : cpu().available_bytes();
  }
  void release(void* p) const override {
    check("release", {});
    {
      std::lock_guard lock(mutex_);
      allocations_.erase(static_cast<const char*>(p));
    }
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
    largest_download = std::max(largest_download, int64_t(bytes));
    ++downloads;
    cpu().download(host, from, bytes);
  }
  void fill(float* x, int64_t n, float value) const override {
    check("fill", {x});
    cpu().fill(x, n, value);
  }
  // Every row inside one allocation, and the rows free to be copied in any order (a GPU
  // copies them at once): no destination row overlaps another or a source row.
  void copy_rows(float* dst, const float* src, const int64_t* to, const int64_t* from, int64_t n,
                 int64_t width) const override {
    check("copy_rows", {dst, src, to, from});
    std::vector<std::pair<const float*, const float*>> written, read;
    for (int64_t i = 0; i < n; ++i) {
      written.emplace_back(dst + to[i], dst + to[i] + width);
      read.emplace_back(src + from[i], src + from[i] + width);
    }
    std::sort(written.begin(), written.end());
    std::sort(read.begin(), read.end());
    const auto overlap = [](const auto& a, const auto& b) {
      return a.first < b.second && b.first < a.second;
    };
    bool fine = true;
    for (size_t i = 0; i < written.size(); ++i) {
      fine = fine && within_one_allocation(written[i]) && within_one_allocation(read[i]);
      fine = fine && (i == 0 || !overlap(written[i - 1], written[i]));
      // Every source row that starts before this row ends.
      for (auto r = read.begin(); r != read.end() && r->first < written[i].second; ++r)
        fine = fine && !overlap(*r, written[i]);
    }
    if (!fine) {
      std::lock_guard lock(mutex_);
      strays.push_back("copy_rows: rows");
    }
    cpu().copy_rows(dst, src, to, from, n, width);
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
  int64_t packed_panel_rows() const override { return cpu().packed_panel_rows(); }
  int64_t packed_weight_bytes(ops::WeightType type, int64_t in_dim,
                              int64_t out_dim) const override {
    return cpu().packed_weight_bytes(type, in_dim, out_dim);
  }
  void pack_weight_rows(ops::WeightType type, void* packed, const float* rows, int64_t first_row,
                        int64_t row_count, int64_t in_dim, int64_t out_dim,
                        const std::string& what) const override {
    check("pack_weight_rows", {packed});  // rows are host memory
    cpu().pack_weight_rows(type, packed, rows, first_row, row_count, in_dim, out_dim, what);
  }
  void linear_packed_forward(float* out, const float* in, const void* w, ops::WeightType type,
                             int64_t rows, int64_t in_dim, int64_t out_dim,
                             bool accumulate) const override {
    check("linear_packed_forward", {out, in, w});
    decode_linear_flops += 2.0 * double(rows) * double(in_dim) * double(out_dim);
    cpu().linear_packed_forward(out, in, w, type, rows, in_dim, out_dim, accumulate);
  }
  void embedding_packed_forward(float* out, const int32_t* tokens, const void* packed,
                                ops::WeightType type, int64_t n, int64_t d,
                                int64_t V) const override {
    check("embedding_packed_forward", {out, tokens, packed});
    cpu().embedding_packed_forward(out, tokens, packed, type, n, d, V);
  }
  void embedding_forward(float* out, const int32_t* tokens, const float* table, int64_t n,
                         int64_t d) const override {
    check("embedding_forward", {out, tokens, table});
    cpu().embedding_forward(out, tokens, table, n, d);
  }
  // Asks for the rows grouped by token, as a GPU backend does, and checks the ones it gets.
  int64_t embedding_run_rows() const override { return kRunRows; }
  void embedding_backward(float* dtable, const float* dout, const int32_t* tokens, int64_t n,
                          int64_t d, const ops::TokenRows* by_token) const override {
    check("embedding_backward", {dtable, dout, tokens});
    check_token_rows(tokens, n, by_token);
    cpu().embedding_backward(dtable, dout, tokens, n, d, nullptr);
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
  void top_k_rows(int32_t* ids, float* values, int32_t* first_nonfinite, const float* x,
                  int64_t rows, int64_t n, const uint8_t* banned, int64_t k) const override {
    check("top_k_rows", {ids, values, first_nonfinite, x, banned});
    cpu().top_k_rows(ids, values, first_nonfinite, x, rows, n, banned, k);
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
    check("attention_decode",
          {out, qkv, pk, pv, rk, rv, layout.persistent_end, layout.ring_len, layout.ring_next});
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
  bool within_one_allocation(const std::pair<const float*, const float*>& row) const {
    std::lock_guard lock(mutex_);
    const char* begin = reinterpret_cast<const char*>(row.first);
    const char* end = reinterpret_cast<const char*>(row.second);
    auto it = allocations_.upper_bound(begin);
    if (it == allocations_.begin()) return false;
    --it;
    return begin < it->first + it->second && end <= it->first + it->second;
  }
  static constexpr int64_t kTile = 16, kRunRows = 3;
  // The rows grouped by token are the plan of its tokens (host memory underneath), in this
  // backend's memory.
  void check_token_rows(const int32_t* tokens, int64_t n, const ops::TokenRows* rows) const {
    ops::TokenRowPlan expected;
    const int64_t vocab = n > 0 ? *std::max_element(tokens, tokens + n) + 1 : 1;
    ops::plan_token_rows(expected, tokens, n, vocab, kRunRows);
    const auto same = [](const int32_t* got, const std::vector<int32_t>& want) {
      return std::equal(want.begin(), want.end(), got);
    };
    bool fine = rows && rows->tokens == expected.tokens &&
                rows->long_tokens == expected.long_tokens && rows->runs == expected.runs;
    fine = fine && same(rows->order, expected.order) &&
           same(rows->token_starts, expected.token_starts) &&
           same(rows->run_starts, expected.run_starts) &&
           same(rows->token_runs, expected.token_runs);
    std::lock_guard lock(mutex_);
    fine = fine && owned(rows->order) && owned(rows->token_runs + expected.token_runs.size() - 1);
    if (!fine) strays.push_back("embedding_backward: rows by token");
  }
  // The layout's tile plan is the plan of its own doc and doc_start arrays (this backend's
  // memory is host memory underneath), with its pair count.
  void check_tile_plan(const char* op, const ops::AttentionLayout& layout) const {
    ops::AttentionTilePlan expected;
    ops::plan_attention_tiles(expected, layout, kTile, kTile);
    const bool same = layout.tile_kinds && layout.tile == kTile &&
                      layout.tile_pairs == expected.computed_pairs &&
                      std::equal(expected.kinds.begin(), expected.kinds.end(), layout.tile_kinds);
    if (!same) {
      std::lock_guard lock(mutex_);
      strays.push_back(std::string(op) + ": tile plan");
    }
  }
  void check(const char* op, std::initializer_list<const void*> pointers) const {
    std::lock_guard lock(mutex_);
    ++calls;
    if (!threads_.contains(std::this_thread::get_id()))
      strays.push_back(std::string(op) + ": thread");
    int k = 0;
    for (const void* p : pointers) {
      if (p && !owned(p)) strays.push_back(std::string(op) + ": argument " + std::to_string(k));
      ++k;
    }
  }
  mutable std::mutex mutex_;  // a server's thread and the test's may both call
  mutable std::map<const char*, size_t> allocations_;
  // Threads that may call: the one that made the backend (a GPU's is selected when its
  // backend is made) and those that said use_on_this_thread.
  mutable std::set<std::thread::id> threads_ = {std::this_thread::get_id()};
};

}  // namespace sps::testing

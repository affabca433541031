#pragma once
// A backend for tests of the backend boundary: it wraps the CPU backend and records every
// pointer an op or a copy receives that lies outside its own allocations (a GPU backend
// could not read a host array), and every call from a thread that did not select it. Its ops
// are those of ops/op_list.h, each checked (check_arguments, also_check) and then run by the
// CPU backend.
#include <algorithm>
#include <cstdint>
#include <map>
#include <mutex>
#include <optional>
#include <set>
#include <string>
#include <string_view>
#include <thread>
#include <type_traits>
#include <vector>

#include "ops/attention_plan.h"
#include "ops/backend.h"
#include "ops/decode_keys.h"
#include "ops/token_rows.h"

namespace sps::testing {

// One tag type per op of ops/op_list.h: the checks some ops add (CheckingBackend::also_check).
namespace checked_op {
#define SPS_OP_TAG(result, name, parameters, arguments) \
  struct name {};
SPS_BACKEND_OPS(SPS_OP_TAG)
#undef SPS_OP_TAG
}  // namespace checked_op

// (a, b, c) → a, b, c: an op's arguments, after others.
#define SPS_OP_ARGUMENTS(...) __VA_ARGS__

class CheckingBackend final : public ops::Backend<float> {
 public:
  using T = float;  // the element type of ops/op_list.h
  // "op: argument" for each pointer outside, the argument named as ops/op_list.h names it
  // (e.g. "linear_forward: in", "attention_forward: layout.doc"); "op: thread" for each call
  // from a thread that did not say use_on_this_thread (a GPU's current device is the calling
  // thread's).
  mutable std::vector<std::string> strays;
  mutable int64_t calls = 0;
  mutable double decode_linear_flops = 0;  // 2·rows·in·out of every decode or packed linear
  mutable int64_t decode_pairs = 0;        // the pairs of every attention_decode, summed
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
    check_arguments("allocate", "()");
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
    check_arguments("release", "()");
    {
      std::lock_guard lock(mutex_);
      allocations_.erase(static_cast<const char*>(p));
    }
    cpu().release(p);
  }
  void copy(void* to, const void* from, size_t bytes) const override {
    check_arguments("copy", "(to, from)", to, from);
    cpu().copy(to, from, bytes);
  }
  void upload(void* to, const void* host, size_t bytes) const override {
    check_arguments("upload", "(to)", to);
    cpu().upload(to, host, bytes);
  }
  void download(void* host, const void* from, size_t bytes) const override {
    check_arguments("download", "(from)", from);
    largest_download = std::max(largest_download, int64_t(bytes));
    ++downloads;
    cpu().download(host, from, bytes);
  }
  // Asks for the rows grouped by token, as a GPU backend does, and checks the ones it gets.
  int64_t embedding_run_rows() const override { return kRunRows; }
  int64_t packed_panel_rows() const override { return cpu().packed_panel_rows(); }

  // Every op of ops/op_list.h: its arguments checked, then the CPU backend's op.
#define SPS_CHECKED_OP(result, name, parameters, arguments)         \
  result name parameters const override {                           \
    check_arguments(#name, #arguments, SPS_OP_ARGUMENTS arguments); \
    also_check(checked_op::name{}, SPS_OP_ARGUMENTS arguments);     \
    return cpu().name arguments;                                    \
  }
  SPS_BACKEND_OPS(SPS_CHECKED_OP)
#undef SPS_CHECKED_OP

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
  void check_tile_plan(std::string_view op, const ops::AttentionLayout& layout) const {
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
  // Every call: from a thread that selected this backend, and every pointer among its
  // arguments, and every array of a layout or of rows grouped by token, inside its
  // allocations, but pack_weight_rows' rows (host memory, ops/op_list.h). `names` are the
  // arguments as the list writes them, "(a, b, c)", for the messages.
  void check_arguments(const char* op, [[maybe_unused]] const char* names,
                       const auto&... arguments) const {
    {
      std::lock_guard lock(mutex_);
      ++calls;
      if (!threads_.contains(std::this_thread::get_id()))
        strays.push_back(std::string(op) + ": thread");
    }
    [[maybe_unused]] int k = 0;
    (check_argument(op, argument_name(names, k++), arguments), ...);
  }
  template <typename X>
  void check_argument(std::string_view op, const std::string& name, const X& x) const {
    if constexpr (std::is_same_v<X, const ops::TokenRows*>) {
      if (!x) return;
      check_pointer(op, name + "->order", x->order);
      check_pointer(op, name + "->token_starts", x->token_starts);
      check_pointer(op, name + "->run_starts", x->run_starts);
      check_pointer(op, name + "->token_runs", x->token_runs);
    } else if constexpr (std::is_pointer_v<X>) {
      if (!(op == "pack_weight_rows" && name == "rows")) check_pointer(op, name, x);
    } else if constexpr (std::is_same_v<X, ops::AttentionLayout>) {
      check_pointer(op, name + ".doc", x.doc);
      check_pointer(op, name + ".doc_start", x.doc_start);
      check_pointer(op, name + ".tile_kinds", x.tile_kinds);
      check_tile_plan(op, x);
    } else if constexpr (std::is_same_v<X, ops::DecodeAttentionLayout>) {
      check_pointer(op, name + ".persistent_end", x.persistent_end);
      check_pointer(op, name + ".ring_len", x.ring_len);
      check_pointer(op, name + ".ring_next", x.ring_next);
    }
  }
  void check_pointer(std::string_view op, const std::string& name, const void* p) const {
    std::lock_guard lock(mutex_);
    if (p && !owned(p)) strays.push_back(std::string(op) + ": " + name);
  }
  // The k-th of "(a, b, c)".
  static std::string argument_name(std::string_view names, int k) {
    names = names.substr(1, names.size() - 2);
    for (int i = 0; i < k; ++i) names.remove_prefix(names.find(", ") + 2);
    return std::string(names.substr(0, names.find(',')));
  }

  // What some ops are checked or counted for besides their arguments (with the arguments of
  // ops/op_list.h); nothing for the others.
  void also_check(auto, const auto&...) const {}
  // Every row inside one allocation, and the rows free to be copied in any order (a GPU
  // copies them at once): no destination row overlaps another or a source row.
  void also_check(checked_op::copy_rows, auto dst, auto src, auto to, auto from, auto n,
                  auto width) const {
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
  }
  void also_check(checked_op::embedding_backward, auto, auto, auto tokens, auto n, auto,
                  auto by_token) const {
    check_token_rows(tokens, n, by_token);
  }
  void also_check(checked_op::linear_decode_forward, auto, auto, auto, auto rows, auto in_dim,
                  auto out_dim, auto) const {
    decode_linear_flops += 2.0 * double(rows) * double(in_dim) * double(out_dim);
  }
  void also_check(checked_op::linear_packed_forward, auto, auto, auto, auto, auto rows, auto in_dim,
                  auto out_dim, auto) const {
    decode_linear_flops += 2.0 * double(rows) * double(in_dim) * double(out_dim);
  }
  void also_check(checked_op::attention_decode, auto, auto, auto, auto, auto, auto,
                  const auto& layout) const {
    decode_pairs += ops::decode_attention_pairs(layout);  // its own memory is host memory
  }
  void also_check(checked_op::attention_decode_bf16_cache, auto, auto, auto, auto, auto, auto,
                  const auto& layout) const {
    decode_pairs += ops::decode_attention_pairs(layout);
  }
  mutable std::mutex mutex_;  // a server's thread and the test's may both call
  mutable std::map<const char*, size_t> allocations_;
  // Threads that may call: the one that made the backend (a GPU's is selected when its
  // backend is made) and those that said use_on_this_thread.
  mutable std::set<std::thread::id> threads_ = {std::this_thread::get_id()};
};

}  // namespace sps::testing

// oneDNN's matmul as the GEMMs of onednn_matmul.h. A primitive is made once per shape (made
// or found missing: both are kept), with a user scratchpad so that oneDNN allocates none of
// its own per run, and is run through the C API with its memory objects' data handles set
// per call, which allocates nothing on our side. oneDNN 2.6 itself allocates a few small
// nodes per execution (the map of its arguments): counted as a library's (util/alloc_counter.h).
#include "ops/cpu/onednn_matmul.h"

#include <fmt/format.h>

#include <cstdlib>
#include <map>
#include <memory>
#include <mutex>
#include <oneapi/dnnl/dnnl.hpp>
#include <optional>
#include <tuple>

#include "util/alloc_counter.h"
#include "util/error.h"

namespace sps::ops::cpu::onednn {

namespace {

using dnnl::memory;

dnnl::engine& engine() {
  static dnnl::engine cpu(dnnl::engine::kind::cpu, 0);
  return cpu;
}
dnnl::stream& stream() {
  static dnnl::stream s(engine());
  return s;
}

void check(dnnl_status_t status, const char* what) {
  if (status != dnnl_success) fail("oneDNN {}: status {}", what, int(status));
}

memory::data_type dnnl_type(DataType type) {
  return type == DataType::f32 ? memory::data_type::f32 : memory::data_type::bf16;
}

// A row-major [rows, cols] matrix with row stride ld, or one stored transposed ([cols, rows]).
memory::desc matrix(memory::data_type type, int64_t rows, int64_t cols, int64_t ld,
                    bool transposed) {
  return memory::desc({rows, cols}, type, transposed ? memory::dims{1, ld} : memory::dims{ld, 1});
}

// Every primitive is made with these: a scratchpad we provide (none allocated per run), and
// for accumulating GEMMs C += A·B as a sum post-op.
dnnl::primitive_attr attributes(bool accumulate) {
  dnnl::primitive_attr attr;
  attr.set_scratchpad_mode(dnnl::scratchpad_mode::user);
  if (accumulate) {
    dnnl::post_ops sum;
    sum.append_sum(1.0f);
    attr.set_post_ops(sum);
  }
  return attr;
}

// The M the prepared layout of a B is asked for: oneDNN's weight layouts depend on the
// type, K and N, not on M, and one layout per B is what lets one copy serve every M.
constexpr int64_t kLayoutRows = 1024;

// What oneDNN makes once and keeps, under one lock: the primitives (their memory objects
// change data handles per run) and the scratchpad they share.
struct Plan {
  dnnl::matmul::primitive_desc pd;
  dnnl::matmul primitive;
  memory src, weights, dst, scratchpad;  // no data until a run sets them
  size_t scratchpad_bytes = 0;
};
struct Reorder {
  dnnl::reorder primitive;
  memory from, to;
};
using LayoutKey = std::tuple<DataType, int64_t, int64_t>;
using ReorderKey = std::tuple<DataType, bool, int64_t, int64_t, int64_t>;
struct State {
  std::mutex mutex;
  std::map<Gemm, std::unique_ptr<Plan>> plans;  // null: oneDNN has no implementation
  std::map<LayoutKey, std::optional<memory::desc>> layouts;
  std::map<ReorderKey, std::unique_ptr<Reorder>> reorders;
  void* scratchpad = nullptr;
  size_t scratchpad_capacity = 0;
  void reserve_scratchpad(size_t bytes) {
    if (bytes <= scratchpad_capacity) return;
    std::free(scratchpad);
    scratchpad = std::aligned_alloc(4096, (bytes + 4095) / 4096 * 4096);
    if (!scratchpad) throw std::bad_alloc();
    scratchpad_capacity = bytes;
  }
};
State& state() {
  static State& s = *new State;  // never destroyed: oneDNN's own statics may go first
  return s;
}

const std::optional<memory::desc>& layout_locked(State& s, DataType type, int64_t K, int64_t N) {
  auto [it, added] = s.layouts.try_emplace(LayoutKey{type, K, N});
  if (!added) return it->second;
  try {
    const dnnl::matmul::desc desc(matrix(dnnl_type(type), kLayoutRows, K, K, false),
                                  memory::desc({K, N}, dnnl_type(type), memory::format_tag::any),
                                  matrix(memory::data_type::f32, kLayoutRows, N, N, false));
    it->second = dnnl::matmul::primitive_desc(desc, attributes(false), engine()).weights_desc();
  } catch (const dnnl::error&) {
    // no matmul of this type here: nothing to prepare for
  }
  return it->second;
}

Plan* plan_locked(State& s, const Gemm& g) {
  SPS_ASSERT(g.M > 0 && g.N > 0 && g.K > 0);
  auto [it, added] = s.plans.try_emplace(g);
  if (!added) return it->second.get();
  const memory::data_type type = dnnl_type(g.type);
  std::optional<memory::desc> weights;
  if (g.prepared_b)
    weights = layout_locked(s, g.type, g.K, g.N);
  else
    weights = matrix(type, g.K, g.N, g.ldb, g.trans_b);
  if (!weights) return nullptr;
  try {
    const dnnl::matmul::desc desc(matrix(type, g.M, g.K, g.lda, g.trans_a), *weights,
                                  matrix(memory::data_type::f32, g.M, g.N, g.ldc, false));
    auto plan = std::make_unique<Plan>();
    plan->pd = dnnl::matmul::primitive_desc(desc, attributes(g.accumulate), engine());
    plan->primitive = dnnl::matmul(plan->pd);
    plan->src = memory(plan->pd.src_desc(), engine(), DNNL_MEMORY_NONE);
    plan->weights = memory(plan->pd.weights_desc(), engine(), DNNL_MEMORY_NONE);
    plan->dst = memory(plan->pd.dst_desc(), engine(), DNNL_MEMORY_NONE);
    const memory::desc scratchpad = plan->pd.scratchpad_desc();
    plan->scratchpad_bytes = scratchpad.get_size();
    if (plan->scratchpad_bytes > 0)
      plan->scratchpad = memory(scratchpad, engine(), DNNL_MEMORY_NONE);
    it->second = std::move(plan);
  } catch (const dnnl::error&) {
    // no implementation of this shape and type on this CPU: kept as null
  }
  return it->second.get();
}

}  // namespace

bool available(const Gemm& gemm) {
  State& s = state();
  const std::lock_guard<std::mutex> lock(s.mutex);
  return plan_locked(s, gemm) != nullptr;
}

void run(const Gemm& gemm, const void* A, const void* B, float* C) {
  State& s = state();
  const std::lock_guard<std::mutex> lock(s.mutex);
  Plan* plan = plan_locked(s, gemm);
  SPS_ASSERT(plan != nullptr);
  check(dnnl_memory_set_data_handle(plan->src.get(), const_cast<void*>(A)), "source");
  check(dnnl_memory_set_data_handle(plan->weights.get(), const_cast<void*>(B)), "weights");
  check(dnnl_memory_set_data_handle(plan->dst.get(), C), "destination");
  dnnl_exec_arg_t args[4] = {{DNNL_ARG_SRC, plan->src.get()},
                             {DNNL_ARG_WEIGHTS, plan->weights.get()},
                             {DNNL_ARG_DST, plan->dst.get()}};
  int count = 3;
  if (plan->scratchpad_bytes > 0) {
    s.reserve_scratchpad(plan->scratchpad_bytes);
    check(dnnl_memory_set_data_handle(plan->scratchpad.get(), s.scratchpad), "scratchpad");
    args[count++] = {DNNL_ARG_SCRATCHPAD, plan->scratchpad.get()};
  }
  const LibraryAllocations in_onednn;
  check(dnnl_primitive_execute(plan->primitive.get(), stream().get(), count, args), "matmul");
  check(dnnl_stream_wait(stream().get()), "stream wait");
}

std::string implementation(const Gemm& gemm) {
  State& s = state();
  const std::lock_guard<std::mutex> lock(s.mutex);
  const Plan* plan = plan_locked(s, gemm);
  return plan ? plan->pd.impl_info_str() : "none";
}

bool can_prepare(DataType type, int64_t K, int64_t N) {
  State& s = state();
  const std::lock_guard<std::mutex> lock(s.mutex);
  return layout_locked(s, type, K, N).has_value();
}

size_t prepared_bytes(DataType type, int64_t K, int64_t N) {
  State& s = state();
  const std::lock_guard<std::mutex> lock(s.mutex);
  const std::optional<memory::desc>& layout = layout_locked(s, type, K, N);
  SPS_ASSERT(layout.has_value());
  return layout->get_size();
}

void prepare_b(DataType type, bool trans_b, int64_t K, int64_t N, int64_t ldb, const void* B,
               void* out) {
  State& s = state();
  const std::lock_guard<std::mutex> lock(s.mutex);
  auto [it, added] = s.reorders.try_emplace(ReorderKey{type, trans_b, K, N, ldb});
  if (added) {
    const std::optional<memory::desc>& layout = layout_locked(s, type, K, N);
    SPS_ASSERT(layout.has_value());
    auto reorder = std::make_unique<Reorder>();
    reorder->from = memory(matrix(dnnl_type(type), K, N, ldb, trans_b), engine(), DNNL_MEMORY_NONE);
    reorder->to = memory(*layout, engine(), DNNL_MEMORY_NONE);
    reorder->primitive = dnnl::reorder(reorder->from, reorder->to);
    it->second = std::move(reorder);
  }
  Reorder& r = *it->second;
  check(dnnl_memory_set_data_handle(r.from.get(), const_cast<void*>(B)), "reorder source");
  check(dnnl_memory_set_data_handle(r.to.get(), out), "reorder destination");
  dnnl_exec_arg_t args[2] = {{DNNL_ARG_FROM, r.from.get()}, {DNNL_ARG_TO, r.to.get()}};
  const LibraryAllocations in_onednn;
  check(dnnl_primitive_execute(r.primitive.get(), stream().get(), 2, args), "reorder");
  check(dnnl_stream_wait(stream().get()), "stream wait");
}

std::string version() {
  const dnnl_version_t* v = dnnl_version();
  return fmt::format("oneDNN {}.{}.{}", v->major, v->minor, v->patch);
}

std::string cpu_isa() {
  switch (dnnl_get_effective_cpu_isa()) {
    case dnnl_cpu_isa_sse41: return "sse41";
    case dnnl_cpu_isa_avx: return "avx";
    case dnnl_cpu_isa_avx2: return "avx2";
    case dnnl_cpu_isa_avx2_vnni: return "avx2_vnni";
    case dnnl_cpu_isa_avx512_mic: return "avx512_mic";
    case dnnl_cpu_isa_avx512_mic_4ops: return "avx512_mic_4ops";
    case dnnl_cpu_isa_avx512_core: return "avx512_core";
    case dnnl_cpu_isa_avx512_core_vnni: return "avx512_core_vnni";
    case dnnl_cpu_isa_avx512_core_bf16: return "avx512_core_bf16";
    case dnnl_cpu_isa_avx512_core_amx: return "avx512_core_amx";
    default: return "no x86 ISA (another architecture)";
  }
}

}  // namespace sps::ops::cpu::onednn

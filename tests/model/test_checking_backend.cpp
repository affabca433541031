// The checking backend of the backend-boundary tests (checking_backend.h), whose wrappers
// are made from ops/op_list.h, catches what it is there to catch: an argument outside its
// memory, named as the list names it (a layout's arrays and by_token's too), but not
// pack_weight_rows' host rows; a call from a thread that did not select it; rows of
// copy_rows that overlap; rows grouped by token that are not their tokens' plan.
#include <gtest/gtest.h>

#include <cstdint>
#include <string>
#include <thread>
#include <vector>

#include "model/checking_backend.h"
#include "ops/token_rows.h"

namespace sps::testing {
namespace {

using Strays = std::vector<std::string>;

// n elements of the backend's memory, copied from `host`.
template <typename E>
ops::DeviceBuffer<E> uploaded(const CheckingBackend& backend, const std::vector<E>& host) {
  ops::DeviceBuffer<E> buffer(backend);
  buffer.upload(host.data(), host.size());
  return buffer;
}

TEST(CheckingBackend, NamesEachArgumentOutsideItsMemoryAndCountsEachCall) {
  const CheckingBackend checking;
  const std::vector<float> ones(8, 1.0f);
  auto x = uploaded(checking, ones), out = uploaded(checking, ones);
  auto rstd = uploaded(checking, std::vector<float>(2)), gain = uploaded(checking, ones);
  int64_t calls = checking.calls;
  checking.rmsnorm_forward(out.data(), rstd.data(), x.data(), gain.data(), 2, 4, 1e-5);
  EXPECT_EQ(checking.calls, calls + 1);
  EXPECT_EQ(checking.strays, Strays{});

  checking.rmsnorm_forward(out.data(), rstd.data(), ones.data(), gain.data(), 2, 4, 1e-5);
  EXPECT_EQ(checking.strays, Strays{"rmsnorm_forward: in"});
  checking.strays.clear();
  calls = checking.calls;
  std::vector<float> host(4);
  checking.fill(host.data(), 4, 0.0f);
  EXPECT_EQ(checking.calls, calls + 1);
  EXPECT_EQ(checking.strays, Strays{"fill: x"});
}

// One new token over an empty cache: it sees only itself, one pair.
TEST(CheckingBackend, NamesTheArraysOfALayoutOutsideItsMemory) {
  const CheckingBackend checking;
  auto qkv = uploaded(checking, std::vector<float>(12, 0.5f));
  auto out = uploaded(checking, std::vector<float>(4)), cache = uploaded(checking, std::vector<float>(4));
  const std::vector<int64_t> cached = {0};
  auto persistent_end = uploaded(checking, cached);
  ops::DecodeAttentionLayout layout;
  layout.batch = layout.heads = layout.persistent_capacity = 1;
  layout.head_dim = 4;
  layout.persistent_end = persistent_end.data();
  checking.attention_decode(out.data(), qkv.data(), cache.data(), cache.data(), nullptr, nullptr,
                            layout);
  EXPECT_EQ(checking.strays, Strays{});
  EXPECT_EQ(checking.decode_pairs, 1);

  layout.persistent_end = cached.data();
  checking.attention_decode(out.data(), qkv.data(), cache.data(), cache.data(), nullptr, nullptr,
                            layout);
  EXPECT_EQ(checking.strays, Strays{"attention_decode: layout.persistent_end"});
}

TEST(CheckingBackend, LetsPackWeightRowsReadHostRowsIntoItsMemoryOnly) {
  const CheckingBackend checking;
  const int64_t in_dim = 4, out_dim = checking.packed_panel_rows();
  const int64_t bytes = checking.packed_weight_bytes(ops::WeightType::f32, in_dim, out_dim);
  const std::vector<float> rows(size_t(out_dim * in_dim), 0.5f);
  std::vector<uint8_t> host_packed(static_cast<size_t>(bytes));
  auto packed = uploaded(checking, host_packed);
  checking.pack_weight_rows(ops::WeightType::f32, packed.data(), rows.data(), 0, out_dim, in_dim,
                            out_dim, "w");
  EXPECT_EQ(checking.strays, Strays{});
  checking.pack_weight_rows(ops::WeightType::f32, host_packed.data(), rows.data(), 0, out_dim,
                            in_dim, out_dim, "w");
  EXPECT_EQ(checking.strays, Strays{"pack_weight_rows: packed"});
}

TEST(CheckingBackend, FlagsACallFromAThreadThatDidNotSelectIt) {
  const CheckingBackend checking;
  auto x = uploaded(checking, std::vector<float>(4));
  std::thread([&] { checking.fill(x.data(), 4, 1.0f); }).join();
  EXPECT_EQ(checking.strays, Strays{"fill: thread"});
  checking.strays.clear();
  std::thread([&] {
    checking.use_on_this_thread();
    checking.fill(x.data(), 4, 1.0f);
  }).join();
  EXPECT_EQ(checking.strays, Strays{});
}

// Rows [0, 4) and [4, 8) of dst from rows [8, 12) and [12, 16) of src: apart. Then
// destination rows that overlap each other, and one that overlaps a source row.
TEST(CheckingBackend, FlagsCopiedRowsThatOverlap) {
  const CheckingBackend checking;
  auto data = uploaded(checking, std::vector<float>(16, 1.0f));
  const auto copy = [&](float* dst, std::vector<int64_t> to, std::vector<int64_t> from) {
    auto to_rows = uploaded(checking, to), from_rows = uploaded(checking, from);
    checking.copy_rows(dst, data.data(), to_rows.data(), from_rows.data(), int64_t(to.size()), 4);
  };
  auto dst = uploaded(checking, std::vector<float>(16));
  copy(dst.data(), {0, 4}, {8, 12});
  copy(data.data(), {0, 4}, {8, 12});
  EXPECT_EQ(checking.strays, Strays{});
  copy(dst.data(), {0, 2}, {8, 12});
  EXPECT_EQ(checking.strays, Strays{"copy_rows: rows"});
  checking.strays.clear();
  // Row 0 reads [8, 12) that row 1 writes (each row's own copy stays apart).
  copy(data.data(), {0, 8}, {8, 12});
  EXPECT_EQ(checking.strays, Strays{"copy_rows: rows"});
}

// Tokens 2, 0, 2: the plan of their rows in runs of the backend's length, or anything else.
TEST(CheckingBackend, ChecksTheRowsGroupedByTokenAgainstTheirPlan) {
  const CheckingBackend checking;
  const std::vector<int32_t> host_tokens = {2, 0, 2};
  auto tokens = uploaded(checking, host_tokens);
  auto table = uploaded(checking, std::vector<float>(3 * 2)),
       dout = uploaded(checking, std::vector<float>(3 * 2, 1.0f));
  ops::TokenRowPlan plan;
  ops::plan_token_rows(plan, host_tokens.data(), 3, 3, checking.embedding_run_rows());
  const std::vector<int32_t> host_rows = plan.packed();
  auto rows = uploaded(checking, host_rows);
  const ops::TokenRows by_token = plan.view(rows.data());
  checking.embedding_backward(table.data(), dout.data(), tokens.data(), 3, 2, &by_token);
  EXPECT_EQ(checking.strays, Strays{});

  checking.embedding_backward(table.data(), dout.data(), tokens.data(), 3, 2, nullptr);
  EXPECT_EQ(checking.strays, Strays{"embedding_backward: rows by token"});
  checking.strays.clear();
  const ops::TokenRows on_host = plan.view(host_rows.data());
  checking.embedding_backward(table.data(), dout.data(), tokens.data(), 3, 2, &on_host);
  EXPECT_EQ(checking.strays, (Strays{"embedding_backward: by_token->order",
                                     "embedding_backward: by_token->token_starts",
                                     "embedding_backward: by_token->run_starts",
                                     "embedding_backward: by_token->token_runs",
                                     "embedding_backward: rows by token"}));
}

}  // namespace
}  // namespace sps::testing

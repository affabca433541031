#pragma once
// Runs a CUDA kernel's source on the CPU, so that the kernels written in the subset below
// (ops/cuda/*.cuh) are tested on every build, GPU or not. One block at a time; each thread of
// the block is a fiber (Boost.Context: a switch is a few instructions, no system call) on the
// calling thread, and __syncthreads and warp shuffles switch fibers. Between two barriers the
// threads run one after another in a random order, and shared memory starts as NaN, so a read
// that misses a barrier sees another thread's stale or unwritten data and fails the test
// rather than passing by luck.
//
// The subset: 1-D blocks, threadIdx/blockIdx/blockDim/gridDim, __syncthreads,
// __shfl_xor_sync over whole warps, one dynamic shared-memory array
// (dynamic_shared_floats()), integer atomicAdd, float4, <cmath>, and the bf16 tensor-core
// product of ops/cuda/portable.cuh (mma_bf16_16x8x16). Under AddressSanitizer
// the fiber switches are announced to it, so the sanitizer build checks every global and
// shared-memory access of the kernels too. Slow (a fiber switch per thread and barrier):
// for test shapes.
#include <boost/context/fiber.hpp>
#if defined(__SANITIZE_ADDRESS__)
#include <sanitizer/common_interface_defs.h>
#endif

#include <cmath>
#include <cstdint>
#include <cstring>
#include <functional>
#include <limits>
#include <memory>
#include <numeric>
#include <random>
#include <stdexcept>
#include <type_traits>
#include <vector>

#define __global__
#define __device__
#define __host__
#define __forceinline__ inline
#define __launch_bounds__(...)

struct uint3 {
  unsigned x = 0, y = 0, z = 0;
};
struct dim3 {
  unsigned x = 1, y = 1, z = 1;
};
struct alignas(16) float4 {
  float x, y, z, w;
};

inline uint3 threadIdx, blockIdx;
inline dim3 blockDim, gridDim;

namespace sps::cuda_emulator {

struct Barrier {
  int arrived = 0;
  uint64_t generation = 0;
};

struct Fiber {
  boost::context::fiber context;  // while switched out: where it resumes
  char* stack = nullptr;  // kStackBytes from fiber_stack()
  bool done = false;
  void* fake_stack = nullptr;  // AddressSanitizer's, kept while the fiber is switched out
};

// The block being run: its fibers, barriers, warp exchange slots and shared memory.
struct Block {
  std::vector<Fiber> fibers;
  std::vector<uint32_t> warp_words;  // [thread][kWords] words a warp-wide op exchanges
  boost::context::fiber scheduler;  // while a fiber runs: where it switches back to
  int current = -1;
  Barrier block_barrier;
  std::vector<Barrier> warp_barriers;
  std::vector<float> warp_slots;
  std::vector<float4> shared;
  std::function<void()> body;
  std::mt19937_64 order_rng{12345};
  const void* scheduler_stack = nullptr;  // the calling thread's stack, for AddressSanitizer
  size_t scheduler_stack_size = 0;
};
inline Block* running = nullptr;
constexpr size_t kStackBytes = 256 * 1024;

// The fibers' stacks, allocated once and reused by every launch: zeroing a fresh 256 KiB per
// thread and launch took longer than the kernels.
inline char* fiber_stack(int thread) {
  static std::vector<std::unique_ptr<char[]>> stacks;
  while (int(stacks.size()) <= thread)
    stacks.push_back(std::make_unique_for_overwrite<char[]>(kStackBytes));
  return stacks[thread].get();
}
constexpr int kWords = 10;  // a lane's inputs to one mma: 4 + 2 registers, 4 floats

// AddressSanitizer follows the switches between stacks (its fiber annotations); nothing
// without it.
inline void before_switch(void** fake_stack, const void* stack, size_t size) {
#if defined(__SANITIZE_ADDRESS__)
  __sanitizer_start_switch_fiber(fake_stack, stack, size);
#else
  (void)fake_stack, (void)stack, (void)size;
#endif
}
inline void after_switch(void* fake_stack, const void** stack, size_t* size) {
#if defined(__SANITIZE_ADDRESS__)
  __sanitizer_finish_switch_fiber(fake_stack, stack, size);
#else
  (void)fake_stack, (void)stack, (void)size;
#endif
}

// From the running fiber back to the scheduler, until the scheduler resumes it.
inline void yield() {
  Block& b = *running;
  Fiber& fiber = b.fibers[b.current];
  before_switch(&fiber.fake_stack, b.scheduler_stack, b.scheduler_stack_size);
  b.scheduler = std::move(b.scheduler).resume();
  after_switch(fiber.fake_stack, &b.scheduler_stack, &b.scheduler_stack_size);
}

// Waits until `expected` threads have arrived at `barrier` (switching to the others).
inline void arrive(Barrier& barrier, int expected) {
  const uint64_t generation = barrier.generation;
  if (++barrier.arrived == expected) {
    barrier.arrived = 0;
    ++barrier.generation;
    return;
  }
  while (barrier.generation == generation) yield();
}

// Runs fiber t of the running block until it waits or ends.
inline void resume(int t) {
  Block& b = *running;
  b.current = t;
  threadIdx = {unsigned(t), 0, 0};
  void* fake_stack = nullptr;
  before_switch(&fake_stack, b.fibers[t].stack, kStackBytes);
  b.fibers[t].context = std::move(b.fibers[t].context).resume();
  after_switch(fake_stack, nullptr, nullptr);
}

// Hands a fiber its stack from fiber_stack().
struct BorrowedStack {
  char* stack;
  boost::context::stack_context allocate() {
    boost::context::stack_context context;
    context.size = kStackBytes;
    context.sp = stack + kStackBytes;
    return context;
  }
  void deallocate(boost::context::stack_context&) noexcept {}
};

// Makes `fiber` start the running block's body from its beginning at its next resume.
inline void start(Fiber& fiber) {
  fiber.done = false;
  fiber.context = boost::context::fiber(
      std::allocator_arg, BorrowedStack{fiber.stack}, [](boost::context::fiber&& scheduler) {
        running->scheduler = std::move(scheduler);
        after_switch(nullptr, &running->scheduler_stack, &running->scheduler_stack_size);
        running->body();
        running->fibers[running->current].done = true;
        before_switch(nullptr, running->scheduler_stack, running->scheduler_stack_size);
        return std::move(running->scheduler);
      });
}

// Runs kernel(args...) over grid × block threads with `shared_bytes` of dynamic shared memory.
template <typename... Params, typename... Args>
void launch(dim3 grid, dim3 block, size_t shared_bytes, void (*kernel)(Params...), Args... args) {
  if (block.y != 1 || block.z != 1 || block.x % 32 != 0)
    throw std::invalid_argument("cuda_emulator: blocks are 1-D and whole warps");
  const int threads = int(block.x), warps = threads / 32;
  Block b;
  b.fibers.resize(threads);
  for (int t = 0; t < threads; ++t) b.fibers[t].stack = fiber_stack(t);
  b.warp_barriers.resize(warps);
  b.warp_slots.resize(threads);
  b.warp_words.resize(size_t(threads) * kWords);
  b.body = [&] { kernel(args...); };
  blockDim = block;
  gridDim = grid;
  running = &b;
  std::vector<int> order(threads);
  std::iota(order.begin(), order.end(), 0);
  const float nan = std::numeric_limits<float>::quiet_NaN();
  for (unsigned z = 0; z < grid.z; ++z)
    for (unsigned y = 0; y < grid.y; ++y)
      for (unsigned x = 0; x < grid.x; ++x) {
        blockIdx = {x, y, z};
        b.shared.assign((shared_bytes + 15) / 16, float4{nan, nan, nan, nan});
        for (Fiber& fiber : b.fibers) start(fiber);
        for (int left = threads; left > 0;) {
          std::shuffle(order.begin(), order.end(), b.order_rng);
          left = 0;
          for (const int t : order) {
            if (b.fibers[t].done) continue;
            resume(t);
            left += !b.fibers[t].done;
          }
        }
      }
  running = nullptr;
}

}  // namespace sps::cuda_emulator

inline void __syncthreads() {
  sps::cuda_emulator::arrive(sps::cuda_emulator::running->block_barrier, int(blockDim.x));
}

// Every lane of the warp must call (the kernels use full masks only).
inline float __shfl_xor_sync(unsigned /*mask*/, float value, int lane_mask) {
  auto& b = *sps::cuda_emulator::running;
  const int t = int(threadIdx.x), warp = t / 32;
  b.warp_slots[t] = value;
  sps::cuda_emulator::arrive(b.warp_barriers[warp], 32);
  const float other = b.warp_slots[warp * 32 + ((t % 32) ^ lane_mask)];
  sps::cuda_emulator::arrive(b.warp_barriers[warp], 32);
  return other;
}

// Integer atomics (one fiber runs at a time).
template <typename U>
inline U atomicAdd(U* address, U value) {
  static_assert(std::is_same_v<U, unsigned> || std::is_same_v<U, unsigned long long>);
  const U old = *address;
  *address = old + value;
  return old;
}

inline uint32_t float_bits(float x) {
  uint32_t u;
  std::memcpy(&u, &x, sizeof u);
  return u;
}
inline float bits_float(uint32_t u) {
  float x;
  std::memcpy(&x, &u, sizeof x);
  return x;
}

// PTX's mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 over the warp: every lane hands
// in its fragments (layout in ops/cuda/portable.cuh) and gets its part of d = a·b + c, the
// products summed in fp32 in k order (the hardware's order within the tile is not
// specified; tests allow for it).
inline void mma_bf16_16x8x16(float (&d)[4], const uint32_t (&a)[4], const uint32_t (&b)[2],
                             const float (&c)[4]) {
  auto& blk = *sps::cuda_emulator::running;
  const int t = int(threadIdx.x), warp = t / 32, lane = t % 32;
  uint32_t* mine = &blk.warp_words[size_t(t) * sps::cuda_emulator::kWords];
  for (int k = 0; k < 4; ++k) mine[k] = a[k];
  for (int k = 0; k < 2; ++k) mine[4 + k] = b[k];
  for (int k = 0; k < 4; ++k) std::memcpy(&mine[6 + k], &c[k], sizeof(float));
  sps::cuda_emulator::arrive(blk.warp_barriers[warp], 32);
  const auto word = [&](int owner, int k) {
    return blk.warp_words[size_t(warp * 32 + owner) * sps::cuda_emulator::kWords + k];
  };
  const auto bf16 = [](uint32_t bits) { return bits_float(bits << 16); };
  const auto a_at = [&](int row, int k) {  // a(row, k)
    const uint32_t r = word((row % 8) * 4 + (k % 8) / 2, row / 8 + 2 * (k / 8));
    return bf16(k % 2 ? r >> 16 : r & 0xffffu);
  };
  const auto b_at = [&](int k, int col) {  // b(k, col)
    const uint32_t r = word(col * 4 + (k % 8) / 2, 4 + k / 8);
    return bf16(k % 2 ? r >> 16 : r & 0xffffu);
  };
  const int g = lane / 4, q = lane % 4;
  float out[4];
  for (int e = 0; e < 4; ++e) {
    const int row = g + 8 * (e / 2), col = 2 * q + e % 2;
    float sum;
    std::memcpy(&sum, &mine[6 + e], sizeof sum);
    for (int k = 0; k < 16; ++k) sum += a_at(row, k) * b_at(k, col);
    out[e] = sum;
  }
  sps::cuda_emulator::arrive(blk.warp_barriers[warp], 32);  // every lane has read the words
  for (int e = 0; e < 4; ++e) d[e] = out[e];
}

inline float* dynamic_shared_floats() {
  return reinterpret_cast<float*>(sps::cuda_emulator::running->shared.data());
}

#pragma once
// Runs a CUDA kernel's source on the CPU, so that the kernels written in the subset below
// (ops/cuda/*.cuh) are tested on every build, GPU or not. One block at a time; each thread of
// the block is a fiber (ucontext) on the calling thread, and __syncthreads and warp shuffles
// switch fibers. Between two barriers the threads run one after another in a random order,
// and shared memory starts as NaN, so a read that misses a barrier sees another thread's
// stale or unwritten data and fails the test rather than passing by luck.
//
// The subset: 1-D blocks, threadIdx/blockIdx/blockDim/gridDim, __syncthreads,
// __shfl_xor_sync over whole warps, one dynamic shared-memory array
// (dynamic_shared_floats()), float4, and <cmath>. Slow (a fiber switch per thread and
// barrier): for test shapes.
#include <ucontext.h>

#include <cmath>
#include <cstdint>
#include <functional>
#include <limits>
#include <numeric>
#include <random>
#include <stdexcept>
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
  ucontext_t context{};
  std::vector<char> stack;
  bool done = false;
};

// The block being run: its fibers, barriers, warp exchange slots and shared memory.
struct Block {
  std::vector<Fiber> fibers;
  ucontext_t scheduler{};
  int current = -1;
  Barrier block_barrier;
  std::vector<Barrier> warp_barriers;
  std::vector<float> warp_slots;
  std::vector<float4> shared;
  std::function<void()> body;
  std::mt19937_64 order_rng{12345};
};
inline Block* running = nullptr;

inline void yield() {
  swapcontext(&running->fibers[running->current].context, &running->scheduler);
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

// Runs fiber t of the running block until it waits or ends. Not inlined: swapcontext returns
// twice, and the caller's loop variables must not live across it.
[[gnu::noinline]] inline void resume(int t) {
  Block& b = *running;
  b.current = t;
  threadIdx = {unsigned(t), 0, 0};
  swapcontext(&b.scheduler, &b.fibers[t].context);
}

inline void start_fiber() {
  running->body();
  running->fibers[running->current].done = true;
}  // returns to the scheduler through uc_link

// Makes `fiber` start the running block's body from its beginning (not inlined: getcontext
// returns twice too).
[[gnu::noinline]] inline void start(Fiber& fiber) {
  fiber.done = false;
  getcontext(&fiber.context);
  fiber.context.uc_stack.ss_sp = fiber.stack.data();
  fiber.context.uc_stack.ss_size = fiber.stack.size();
  fiber.context.uc_link = &running->scheduler;
  makecontext(&fiber.context, start_fiber, 0);
}

// Runs kernel(args...) over grid × block threads with `shared_bytes` of dynamic shared memory.
template <typename... Params, typename... Args>
void launch(dim3 grid, dim3 block, size_t shared_bytes, void (*kernel)(Params...),
            Args... args) {
  if (block.y != 1 || block.z != 1 || block.x % 32 != 0)
    throw std::invalid_argument("cuda_emulator: blocks are 1-D and whole warps");
  constexpr size_t kStack = 256 * 1024;
  const int threads = int(block.x), warps = threads / 32;
  Block b;
  b.fibers.resize(threads);
  for (Fiber& fiber : b.fibers) fiber.stack.resize(kStack);
  b.warp_barriers.resize(warps);
  b.warp_slots.resize(threads);
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
inline unsigned long long atomicAdd(unsigned long long* address, unsigned long long value) {
  const unsigned long long old = *address;
  *address = old + value;
  return old;
}

inline float* dynamic_shared_floats() {
  return reinterpret_cast<float*>(sps::cuda_emulator::running->shared.data());
}

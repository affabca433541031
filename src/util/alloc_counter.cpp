#include "util/alloc_counter.h"

#include <atomic>
#include <cstddef>
#include <cstdlib>
#include <new>

// Under AddressSanitizer the sanitizer's own operator new stays in place (it checks
// new/delete pairing), and allocations are not counted.
#if defined(__SANITIZE_ADDRESS__)
#define SPS_COUNT_ALLOCATIONS 0
#else
#define SPS_COUNT_ALLOCATIONS 1
#endif

namespace {
// One counter per cache line, threads spread over them: a single shared counter made every
// allocation of two tokenizer threads fight over one line (~3% of `data prepare`'s time).
struct alignas(64) Counter {
  std::atomic<int64_t> count{0};
};
constexpr unsigned kCounters = 64;
Counter g_allocations[kCounters];
Counter g_library_allocations[kCounters];
std::atomic<unsigned> g_next_counter{0};
// LibraryAllocations scopes open in the process: the library's own threads (oneDNN's OpenMP
// workers) allocate on its behalf too, so a flag of the calling thread would miss them.
std::atomic<int> g_library_depth{0};

int64_t sum(const Counter (&counters)[kCounters]) {
  int64_t total = 0;
  for (const Counter& c : counters) total += c.count.load(std::memory_order_relaxed);
  return total;
}

#if SPS_COUNT_ALLOCATIONS
void* counted_alloc(std::size_t size, std::size_t alignment) {
  thread_local const unsigned counter = g_next_counter.fetch_add(1) % kCounters;
  Counter* counters =
      g_library_depth.load(std::memory_order_relaxed) > 0 ? g_library_allocations : g_allocations;
  counters[counter].count.fetch_add(1, std::memory_order_relaxed);
  if (size == 0) size = 1;
  void* p = nullptr;
  if (alignment <= alignof(std::max_align_t)) {
    p = std::malloc(size);
  } else {
    size = (size + alignment - 1) / alignment * alignment;
    p = std::aligned_alloc(alignment, size);
  }
  if (!p) throw std::bad_alloc();
  return p;
}
#endif
}  // namespace


namespace sps {
int64_t allocation_count() { return SPS_COUNT_ALLOCATIONS ? sum(g_allocations) : -1; }
int64_t library_allocation_count() {
  return SPS_COUNT_ALLOCATIONS ? sum(g_library_allocations) : -1;
}
LibraryAllocations::LibraryAllocations() { g_library_depth.fetch_add(1); }
LibraryAllocations::~LibraryAllocations() { g_library_depth.fetch_sub(1); }
}  // namespace sps

#if SPS_COUNT_ALLOCATIONS

void* operator new(std::size_t size) { return counted_alloc(size, 0); }
void* operator new[](std::size_t size) { return counted_alloc(size, 0); }
void* operator new(std::size_t size, std::align_val_t a) { return counted_alloc(size, std::size_t(a)); }
void* operator new[](std::size_t size, std::align_val_t a) { return counted_alloc(size, std::size_t(a)); }
void* operator new(std::size_t size, const std::nothrow_t&) noexcept {
  try { return counted_alloc(size, 0); } catch (...) { return nullptr; }
}
void* operator new[](std::size_t size, const std::nothrow_t&) noexcept {
  try { return counted_alloc(size, 0); } catch (...) { return nullptr; }
}
void operator delete(void* p) noexcept { std::free(p); }
void operator delete[](void* p) noexcept { std::free(p); }
void operator delete(void* p, std::size_t) noexcept { std::free(p); }
void operator delete[](void* p, std::size_t) noexcept { std::free(p); }
void operator delete(void* p, std::align_val_t) noexcept { std::free(p); }
void operator delete[](void* p, std::align_val_t) noexcept { std::free(p); }
void operator delete(void* p, std::size_t, std::align_val_t) noexcept { std::free(p); }
void operator delete[](void* p, std::size_t, std::align_val_t) noexcept { std::free(p); }
#endif

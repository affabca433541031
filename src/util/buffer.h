#pragma once
// A heap array whose elements start uninitialised, for large work buffers that are always
// written before they are read (activations, KV caches, logits). std::vector would zero
// them: a memset, and a page fault for every page, at each allocation, even of the parts a
// smaller shape never touches. Here untouched pages are never faulted in.
//
// The array starts on a 64-byte boundary (a cache line, one AVX-512 vector), so a planned
// slice whose offset is a multiple of 64 bytes starts aligned too.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <memory>
#include <new>
#include <type_traits>

namespace sps {

template <typename T>
class Buffer {
  static_assert(std::is_trivially_default_constructible_v<T> && std::is_trivially_destructible_v<T>,
                "Buffer holds plain numbers: nothing is constructed or destroyed");

 public:
  static constexpr size_t kAlignment = 64;

  // n elements, uninitialised; the old contents are dropped.
  void reset(size_t n) {
    data_.reset();
    size_ = 0;
    if (n == 0) return;
    if (n > (SIZE_MAX - kAlignment) / sizeof(T)) throw std::bad_alloc();
    const size_t bytes = (n * sizeof(T) + kAlignment - 1) / kAlignment * kAlignment;
    void* p = std::aligned_alloc(kAlignment, bytes);
    if (!p) throw std::bad_alloc();
    data_.reset(static_cast<T*>(p));
    size_ = n;
  }
  T* data() { return data_.get(); }
  const T* data() const { return data_.get(); }
  size_t size() const { return size_; }
  T& operator[](size_t i) { return data_.get()[i]; }
  const T& operator[](size_t i) const { return data_.get()[i]; }

 private:
  struct Free {
    void operator()(T* p) const { std::free(p); }
  };
  std::unique_ptr<T, Free> data_;
  size_t size_ = 0;
};

}  // namespace sps

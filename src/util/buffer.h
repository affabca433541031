#pragma once
// A heap array whose elements start uninitialised, for large work buffers that are always
// written before they are read (activations, KV caches, logits). std::vector would zero
// them: a memset, and a page fault for every page, at each allocation, even of the parts a
// smaller shape never touches. Here untouched pages are never faulted in.
#include <cstddef>
#include <memory>

namespace sps {

template <typename T>
class Buffer {
 public:
  // n elements, uninitialised; the old contents are dropped.
  void reset(size_t n) {
    data_.reset(n > 0 ? new T[n] : nullptr);
    size_ = n;
  }
  T* data() { return data_.get(); }
  const T* data() const { return data_.get(); }
  size_t size() const { return size_; }
  T& operator[](size_t i) { return data_[i]; }
  const T& operator[](size_t i) const { return data_[i]; }

 private:
  std::unique_ptr<T[]> data_;
  size_t size_ = 0;
};

}  // namespace sps

#include "util/large_buffer.h"

#include <sys/mman.h>

#include <cstdlib>
#include <new>

namespace sps {

void* allocate_large_buffer(size_t bytes) {
  constexpr size_t kHugePage = size_t(2) << 20, kLine = 64;
  const size_t alignment = bytes >= kHugePage ? kHugePage : kLine;
  void* p = nullptr;
  if (posix_memalign(&p, alignment, bytes == 0 ? 1 : bytes) != 0) throw std::bad_alloc();
  // Only the whole huge pages inside the buffer: a tail advised too would take a whole 2 MiB
  // page when touched. Advice only: where the kernel has no transparent huge pages it says
  // EINVAL, and 4 KiB pages remain.
  if (alignment == kHugePage) ::madvise(p, bytes / kHugePage * kHugePage, MADV_HUGEPAGE);
  return p;
}

}  // namespace sps

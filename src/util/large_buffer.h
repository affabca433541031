#pragma once
// Memory for large buffers that are made often and written whole at once (the arrays handed
// to Python, the bf16 copies of the weights): those of 2 MiB or more start on a 2 MiB
// boundary, and the whole 2 MiB pages inside them are advised to the kernel as transparent
// huge pages (madvise MADV_HUGEPAGE). Where transparent huge pages are set to "madvise", only
// advised memory gets them, and without them each first touch costs a page fault per 4 KiB:
// writing 67 MB of fresh logits took 210 ms on a 2-core VM, 7 ms advised. Smaller buffers
// are 64-byte aligned. Not for the backend's buffers: a KV cache is first touched a token at
// a time, where a 2 MiB page per touch measured no better. Release with std::free.
#include <cstddef>

namespace sps {

// Uninitialized; throws std::bad_alloc when there is no memory.
void* allocate_large_buffer(size_t bytes);

}  // namespace sps

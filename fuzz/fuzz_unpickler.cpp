// libFuzzer target: the restricted unpickler on arbitrary bytes, with the memory budget of an
// archive as large as the input. A UserError is the expected answer to bad input; any crash,
// sanitizer report, other exception or use of memory past libFuzzer's RSS limit is a bug.
#include <cstddef>
#include <cstdint>
#include <vector>

#include "interop/pickle.h"
#include "interop/torch_archive.h"
#include "util/error.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  // An exactly sized copy, so reading one byte past the end trips AddressSanitizer.
  const std::vector<uint8_t> bytes(data, data + size);
  try {
    const sps::PickleDocument doc =
        sps::unpickle(bytes.data(), bytes.size(), "fuzz", sps::pickle_memory_budget(bytes.size()));
    // What the parser promises: every tensor view lies inside its storage.
    std::vector<const sps::PickleValue*> todo{&doc.root()};
    for (size_t n = 0; n < todo.size() && n < 100000; ++n) {
      const sps::PickleValue& v = *todo[n];
      if (v.kind == sps::PickleKind::tensor) {
        const sps::PickleValue& s = doc.at(v.tensor.storage);
        if (s.kind != sps::PickleKind::storage) __builtin_trap();
        bool empty = false;
        for (int64_t n : v.tensor.shape) empty = empty || n == 0;
        __int128 last = v.tensor.offset;
        for (size_t i = 0; i < v.tensor.shape.size() && !empty; ++i)
          last += __int128(v.tensor.shape[i] - 1) * v.tensor.stride[i];
        if (!empty && last >= s.storage.numel) __builtin_trap();
      }
      for (uint32_t item : v.items) todo.push_back(&doc.at(item));
    }
  } catch (const sps::UserError&) {
  }
  return 0;
}

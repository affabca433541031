// libFuzzer target: the safetensors header parser on arbitrary bytes. A UserError is the
// expected answer to bad input; any crash, sanitizer report or other exception is a bug.
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <vector>

#include "util/error.h"
#include "util/safetensors.h"

namespace {

void check(const std::vector<uint8_t>& bytes) {
  try {
    sps::SafetensorsHeader header =
        sps::parse_safetensors_header(bytes.data(), bytes.size(), "fuzz");
    for (const sps::TensorInfo& t : header.tensors) {
      // What the parser promises its callers.
      if (t.begin > t.end || header.data_offset + t.end > bytes.size()) __builtin_trap();
      if (static_cast<uint64_t>(t.numel()) * sps::dtype_size(t.dtype) != t.end - t.begin)
        __builtin_trap();
    }
  } catch (const sps::UserError&) {
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  // Exactly sized copies, so reading one byte past the end trips AddressSanitizer.
  check(std::vector<uint8_t>(data, data + size));
  // Input that starts like JSON is also tried as the header of a well-framed file with a
  // small data section, so the fuzzer reaches the JSON checks without guessing the length.
  if (size > 0 && data[0] == '{') {
    std::vector<uint8_t> framed(8 + size + 64, 0);
    for (int i = 0; i < 8; ++i) framed[i] = static_cast<uint8_t>(uint64_t{size} >> (8 * i));
    std::memcpy(framed.data() + 8, data, size);
    check(framed);
  }
  return 0;
}

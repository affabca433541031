#pragma once
// The CUDA toolkit's big shared libraries (cuBLASLt, NCCL), opened when first needed rather
// than linked: mapping and relocating them at every start would cost each command, GPU or
// not, a fifth of a second and hundreds of megabytes of resident memory.
#include <string>

namespace sps::ops::cuda {

// dlopen of `soname` from LD_LIBRARY_PATH and the system's paths, then from the toolkit's
// library folder this sps was built with; a UserError naming `what` and where it looked.
void* open_toolkit_library(const std::string& soname, const char* what);

// The address of `symbol` in `library`; a UserError naming `what` when it is missing.
void* toolkit_symbol(void* library, const char* symbol, const char* what);

// Sets `function` to `symbol` of `library`, with the signature the toolkit's header gives it.
template <typename Function>
void find_symbol(void* library, Function& function, const char* symbol, const char* what) {
  function = reinterpret_cast<Function>(toolkit_symbol(library, symbol, what));
}

}  // namespace sps::ops::cuda

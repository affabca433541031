#include "ops/cuda/toolkit_library.h"

#include <dlfcn.h>

#include "util/error.h"

namespace sps::ops::cuda {

void* open_toolkit_library(const std::string& soname, const char* what) {
  if (void* handle = ::dlopen(soname.c_str(), RTLD_NOW | RTLD_LOCAL)) return handle;
  const std::string first_error = ::dlerror();
  const std::string beside_toolkit = std::string(SPS_CUDA_LIBRARY_DIR) + "/" + soname;
  if (void* handle = ::dlopen(beside_toolkit.c_str(), RTLD_NOW | RTLD_LOCAL)) return handle;
  fail("cannot load {} ({}; nor {}): put the CUDA toolkit's library folder on "
       "LD_LIBRARY_PATH",
       what, first_error, beside_toolkit);
}

void* toolkit_symbol(void* library, const char* symbol, const char* what) {
  void* address = ::dlsym(library, symbol);
  if (!address)
    fail("{}: the library has no {} (an older toolkit than sps was built with?)", what, symbol);
  return address;
}

}  // namespace sps::ops::cuda

# The CUDA backend (src/ops/cuda/), included from the top CMakeLists.txt once sps_ops exists:
# built when the CUDA toolkit is found (SPS_CUDA=auto) or required (ON). Its registry entry
# (registry_entry.cpp) is part of sps_ops in every build, so that a binary without it still
# says how to get it.
set(SPS_CUDA auto CACHE STRING "Build the CUDA backend: auto (when nvcc is found), ON or OFF")
set_property(CACHE SPS_CUDA PROPERTY STRINGS auto ON OFF)
if(SPS_CUDA STREQUAL "auto")
  include(CheckLanguage)
  check_language(CUDA)
  if(CMAKE_CUDA_COMPILER)
    set(SPS_WITH_CUDA ON)
  else()
    set(SPS_WITH_CUDA OFF)
  endif()
else()
  set(SPS_WITH_CUDA ${SPS_CUDA})
endif()

target_sources(sps_ops PRIVATE ${CMAKE_CURRENT_LIST_DIR}/registry_entry.cpp)
if(SPS_WITH_CUDA)
  # Ampere (sm_80, plus its PTX for later GPUs) and Hopper with wgmma and TMA (sm_90a).
  if(NOT DEFINED CMAKE_CUDA_ARCHITECTURES)
    set(CMAKE_CUDA_ARCHITECTURES 80 90a-real)
  endif()
  enable_language(CUDA)
  set(CMAKE_CUDA_STANDARD 17)  # the newest this CMake knows nvcc's flag for
  find_package(CUDAToolkit REQUIRED)
  file(GLOB cuda_srcs CONFIGURE_DEPENDS ${CMAKE_CURRENT_LIST_DIR}/*.cu
    ${CMAKE_CURRENT_LIST_DIR}/*.cpp)
  list(REMOVE_ITEM cuda_srcs ${CMAKE_CURRENT_LIST_DIR}/registry_entry.cpp)
  add_library(sps_ops_cuda STATIC ${cuda_srcs})
  target_include_directories(sps_ops_cuda PUBLIC ${CMAKE_SOURCE_DIR}/src)
  # The static runtime loads the driver only when called: the binary still starts, and runs
  # on the CPU, on a machine with no GPU or driver. cuBLASLt is the toolkit's shared library,
  # opened on first use (ops/cuda/cublaslt_library.h), from the toolkit's folder if need be.
  target_link_libraries(sps_ops_cuda PUBLIC sps_util CUDA::cudart_static ${CMAKE_DL_LIBS})
  target_include_directories(sps_ops_cuda PUBLIC ${CUDAToolkit_INCLUDE_DIRS})
  target_compile_definitions(sps_ops_cuda PRIVATE
    SPS_CUDA_LIBRARY_DIR="${CUDAToolkit_LIBRARY_DIR}")
  # A kernel that spills registers to local memory fails the build.
  target_compile_options(sps_ops_cuda PRIVATE
    $<$<COMPILE_LANGUAGE:CUDA>:-Xptxas=-warn-spills,-warn-lmem-usage,-Werror>)
  target_link_libraries(sps_ops PUBLIC sps_ops_cuda)
  target_compile_definitions(sps_ops PRIVATE SPS_WITH_CUDA=1)
  message(STATUS "sps: CUDA backend ON (${CMAKE_CUDA_COMPILER_VERSION}, architectures ${CMAKE_CUDA_ARCHITECTURES})")
else()
  message(STATUS "sps: CUDA backend OFF (SPS_CUDA=${SPS_CUDA})")
endif()

# The CPU backend (src/ops/cpu/), included from the top CMakeLists.txt before sps_ops: always
# built, the reference the other backends are tested against.
file(GLOB cpu_srcs CONFIGURE_DEPENDS ${CMAKE_CURRENT_LIST_DIR}/*.cpp)
add_library(sps_ops_cpu STATIC ${cpu_srcs})
target_include_directories(sps_ops_cpu PUBLIC ${CMAKE_SOURCE_DIR}/src)
target_link_libraries(sps_ops_cpu PUBLIC sps_util ${OPENBLAS_LIB} ${DNNL_LIB})
target_include_directories(sps_ops_cpu PUBLIC ${DNNL_INCLUDE})
# A portable x86 build carries the packed linear (the inference projections) four times more:
# compiled for AVX-512, for AVX-512 with VNNI, for AVX-512 with VNNI and BF16 and for AVX2
# with AVX-VNNI (the VNNI builds' int8 kernel multiplies bytes in one instruction, the BF16
# build's bf16 kernel pairs of bf16), and runs the one that measures fastest among those the
# CPU has (ops/cpu/linear_packed.h); the attention (training and decode) once more, for
# AVX-512, run where the packed linear's choice is 512 bits wide (ops/cpu/attention_variants.h).
# CpuTargets.*VariantKeepsToItsNamespace checks that each object
# defines nothing outside its own namespace. Optimised builds only: a debug or sanitizer
# build keeps small inline functions out of line, which would then be AVX-512 code under
# shared names.
set(sps_kernel_variants "")
if(sps_march STREQUAL "x86-64-v3" AND NOT SPS_VECTOR_BYTES
   AND CMAKE_BUILD_TYPE MATCHES "^(Release|RelWithDebInfo)$"
   AND NOT CMAKE_CXX_FLAGS MATCHES "-fsanitize")
  set(sps_kernel_variants avx512 avx512vnni avx512bf16 avx2vnni)
endif()
foreach(variant ${sps_kernel_variants})
  add_library(sps_ops_cpu_${variant} OBJECT ${CMAKE_CURRENT_LIST_DIR}/linear_packed.cpp)
  if(variant STREQUAL "avx512")  # the attention, once per vector width
    target_sources(sps_ops_cpu_${variant} PRIVATE ${CMAKE_CURRENT_LIST_DIR}/attention.cpp
      ${CMAKE_CURRENT_LIST_DIR}/attention_decode.cpp)
  endif()
  set(variant_flags -march=x86-64-v4)
  if(variant STREQUAL "avx512vnni")
    list(APPEND variant_flags -mavx512vnni)
  elseif(variant STREQUAL "avx512bf16")
    list(APPEND variant_flags -mavx512vnni -mavx512bf16)
  elseif(variant STREQUAL "avx2vnni")
    set(variant_flags -march=x86-64-v3 -mavxvnni)
  endif()
  # (GCC 12 warns of uninitialised values inside its own AVX-512 intrinsics headers.)
  target_compile_options(sps_ops_cpu_${variant} PRIVATE ${variant_flags} -Wno-uninitialized -Wno-maybe-uninitialized)
  target_compile_definitions(sps_ops_cpu_${variant} PRIVATE SPS_KERNEL_VARIANT=${variant})
  target_link_libraries(sps_ops_cpu_${variant} PRIVATE sps_util)
  target_include_directories(sps_ops_cpu_${variant} PRIVATE ${CMAKE_SOURCE_DIR}/src)
  target_sources(sps_ops_cpu PRIVATE $<TARGET_OBJECTS:sps_ops_cpu_${variant}>)
endforeach()
if(sps_kernel_variants)
  target_compile_definitions(sps_ops_cpu PRIVATE SPS_KERNEL_VARIANTS=1)
endif()

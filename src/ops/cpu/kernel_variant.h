#pragma once
// The build variant a CPU kernel file is compiled for. A portable x86 build compiles some
// kernel files once more per instruction set (CMakeLists.txt's sps_kernel_variants) with
// SPS_KERNEL_VARIANT naming the namespace that build's definitions live in; the build's own
// compilation is `baseline`. The process picks one variant per kernel file at start-up
// (linear_packed.h, attention_variants.h).
#ifndef SPS_KERNEL_VARIANT
#define SPS_KERNEL_VARIANT baseline
#endif
#define SPS_STRINGIFY_(x) #x
#define SPS_STRINGIFY(x) SPS_STRINGIFY_(x)

#pragma once
// Sums between GPUs with NCCL, one process per GPU: the communicator is set up through the
// job's host broadcast of NCCL's id from rank 0. The sums run on a stream of their own, each
// after the kernels issued before it on the default stream (every other op's), so that they
// overlap the kernels issued after it; wait() orders the default stream after them. NCCL is
// opened when first needed (toolkit_library.h); a build whose toolkit has no nccl.h has none.
#include <memory>
#include <string>

#include "ops/backend.h"

namespace sps::ops::cuda {

// Null, with `why` set, unless every process of the job can load NCCL (decided together).
std::unique_ptr<DeviceAllReduce> make_nccl_all_reduce(const JobLink& job, std::string* why);

}  // namespace sps::ops::cuda

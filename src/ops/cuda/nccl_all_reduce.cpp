#include "ops/cuda/nccl_all_reduce.h"

#if __has_include(<nccl.h>)
#include <nccl.h>
#define SPS_HAS_NCCL 1
#endif

#include <cuda_runtime.h>

#include "ops/cuda/check.h"
#include "ops/cuda/toolkit_library.h"
#include "util/error.h"

namespace sps::ops::cuda {

#ifdef SPS_HAS_NCCL
namespace {

// The functions sps calls, with the signatures of the toolkit's header.
struct Nccl {
  decltype(&ncclGetUniqueId) get_unique_id;
  decltype(&ncclCommInitRank) comm_init_rank;
  decltype(&ncclCommDestroy) comm_destroy;
  decltype(&ncclAllReduce) all_reduce;
  decltype(&ncclGetErrorString) error_string;
};

const Nccl& nccl() {
  static const Nccl loaded = [] {
    constexpr const char* what = "NCCL";
    void* library = open_toolkit_library("libnccl.so." + std::to_string(NCCL_MAJOR), what);
    Nccl f{};
    find_symbol(library, f.get_unique_id, "ncclGetUniqueId", what);
    find_symbol(library, f.comm_init_rank, "ncclCommInitRank", what);
    find_symbol(library, f.comm_destroy, "ncclCommDestroy", what);
    find_symbol(library, f.all_reduce, "ncclAllReduce", what);
    find_symbol(library, f.error_string, "ncclGetErrorString", what);
    return f;
  }();
  return loaded;
}

void check_nccl(ncclResult_t result, const char* what) {
  if (result != ncclSuccess) fail("NCCL {}: {}", what, nccl().error_string(result));
}

class NcclAllReduce final : public DeviceAllReduce {
 public:
  explicit NcclAllReduce(const JobLink& job) {
    ncclUniqueId id{};
    if (job.rank == 0) check_nccl(nccl().get_unique_id(&id), "unique id");
    job.broadcast(&id, sizeof id);
    check_nccl(nccl().comm_init_rank(&comm_, job.size, id, job.rank), "communicator");
    // Non-blocking: the legacy default stream does not wait for it, nor it for the default
    // stream, except through the events below.
    check(cudaStreamCreateWithFlags(&stream_, cudaStreamNonBlocking), "NCCL stream");
    check(cudaEventCreateWithFlags(&written_, cudaEventDisableTiming), "NCCL event");
    check(cudaEventCreateWithFlags(&summed_, cudaEventDisableTiming), "NCCL event");
  }
  ~NcclAllReduce() override {
    cudaStreamSynchronize(stream_);
    nccl().comm_destroy(comm_);
    cudaEventDestroy(written_);
    cudaEventDestroy(summed_);
    cudaStreamDestroy(stream_);
  }
  NcclAllReduce(const NcclAllReduce&) = delete;
  NcclAllReduce& operator=(const NcclAllReduce&) = delete;

  void sum(float* data, int64_t n) override {
    // After everything the default stream (every other op of the backend) holds so far.
    check(cudaEventRecord(written_, nullptr), "NCCL event record");
    check(cudaStreamWaitEvent(stream_, written_, 0), "NCCL stream wait");
    check_nccl(nccl().all_reduce(data, data, size_t(n), ncclFloat32, ncclSum, comm_, stream_),
               "all-reduce");
  }
  void wait() override {
    check(cudaEventRecord(summed_, stream_), "NCCL event record");
    check(cudaStreamWaitEvent(nullptr, summed_, 0), "default stream wait");
  }

 private:
  ncclComm_t comm_ = nullptr;
  cudaStream_t stream_ = nullptr;
  cudaEvent_t written_ = nullptr, summed_ = nullptr;
};

}  // namespace

std::unique_ptr<DeviceAllReduce> make_nccl_all_reduce(const JobLink& job, std::string* why) {
  bool loaded = true;
  try {
    nccl();
  } catch (const UserError& e) {
    loaded = false;
    *why = e.what();
  }
  if (!job.all(loaded)) {  // every process takes the same path, or none would finish
    if (loaded) *why = "another process cannot load NCCL";
    return nullptr;
  }
  return std::make_unique<NcclAllReduce>(job);
}
#else
std::unique_ptr<DeviceAllReduce> make_nccl_all_reduce(const JobLink& job, std::string* why) {
  job.all(false);
  *why = "this sps was built without NCCL (the CUDA toolkit had no nccl.h)";
  return nullptr;
}
#endif

}  // namespace sps::ops::cuda

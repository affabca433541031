#include "ops/cuda/nccl_all_reduce.h"

#if __has_include(<nccl.h>)
#include <nccl.h>
#define SPS_HAS_NCCL 1
#endif

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
  }
  ~NcclAllReduce() override { nccl().comm_destroy(comm_); }
  NcclAllReduce(const NcclAllReduce&) = delete;
  NcclAllReduce& operator=(const NcclAllReduce&) = delete;

  void sum(float* data, int64_t n) override {
    // Stream 0: the default stream every other op of the backend runs on.
    check_nccl(nccl().all_reduce(data, data, size_t(n), ncclFloat32, ncclSum, comm_, nullptr),
               "all-reduce");
  }

 private:
  ncclComm_t comm_ = nullptr;
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

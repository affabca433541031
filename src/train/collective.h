#pragma once
// The few collective operations data-parallel training needs, behind a small interface: a
// single-process implementation and an MPI one (processes on one node or many), which sums
// GPU buffers with a device all-reduce (NCCL) when given one, else through host copies.
// Every rank calls the same operations in the same order.
#include <cstdint>
#include <memory>
#include <string>
#include <type_traits>
#include <utility>

#include "ops/backend.h"
#include "ops/device.h"

namespace sps {

class Collective {
 public:
  virtual ~Collective() = default;
  virtual int rank() const = 0;
  virtual int size() const = 0;
  // This process's rank among those on its own machine (0 … processes there − 1).
  virtual int local_rank() const = 0;
  // In place: every rank ends with the element-wise sum over ranks (the same bits on every
  // rank).
  virtual void allreduce_sum(float* data, int64_t n) = 0;
  virtual void allreduce_sum(double* data, int64_t n) = 0;
  // `bytes` bytes from `root` to every rank.
  virtual void broadcast(void* data, int64_t bytes, int root) = 0;

  // allreduce_sum of n elements at `data` in `memory`: on the devices with the all-reduce
  // given to use_device_all_reduce (float buffers off the host), else through a host copy.
  template <typename T>
  void allreduce_sum_in(const ops::Memory& memory, T* data, int64_t n) {
    if constexpr (std::is_same_v<T, float>)
      if (device_ && !memory.host_accessible()) {
        device_->sum(data, n);
        return;
      }
    ops::on_host(memory, data, size_t(n), ops::HostAccess::read_write,
                 [&](T* host) { allreduce_sum(host, n); });
  }
  void use_device_all_reduce(std::unique_ptr<ops::DeviceAllReduce> device) {
    device_ = std::move(device);
  }
  virtual void barrier() = 0;
  // Ends every rank's process with `status` (a failure on one rank must not leave the
  // others waiting in a collective).
  [[noreturn]] virtual void abort(int status) = 0;

 private:
  std::unique_ptr<ops::DeviceAllReduce> device_;
};

// One process, no communication.
std::unique_ptr<Collective> make_single_process_collective();

// MPI when this process was started by an MPI launcher (mpirun/mpiexec/srun set
// OMPI_COMM_WORLD_SIZE, PMI_SIZE or PMIX_RANK), else the single-process one: a plain
// `sps train` never initialises MPI. MPI is finalised when the object is destroyed.
std::unique_ptr<Collective> make_collective();

// True when the environment says an MPI launcher started this process.
bool launched_by_mpi();

// The device of a system.device value for this process: under several processes `cuda`
// means the GPU of the process's local rank (a machine's processes take GPUs 0, 1, …);
// `cuda:N` is GPU N for every process, and `cpu` the CPU. `what` names the setting in errors.
ops::Device process_device(const std::string& text, const std::string& what,
                           const Collective& collective);

}  // namespace sps

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
  // On the devices the sum may still run beside the backend's later ops: wait_for_sums()
  // before anything reads the buffer (several sums may be started first, so that they
  // overlap the work that follows them). Through the host it is done on return.
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
  // The backend's ops issued from now on start after every sum allreduce_sum_in started.
  void wait_for_sums() {
    if (device_) device_->wait();
  }
  void use_device_all_reduce(std::unique_ptr<ops::DeviceAllReduce> device) {
    device_ = std::move(device);
  }
  // The size of the buckets a backward's gradients are summed in (BucketedSum).
  int64_t gradient_bucket_bytes() const { return gradient_bucket_bytes_; }
  void set_gradient_bucket_bytes(int64_t bytes) { gradient_bucket_bytes_ = bytes; }
  virtual void barrier() = 0;
  // Ends every rank's process with `status` (a failure on one rank must not leave the
  // others waiting in a collective).
  [[noreturn]] virtual void abort(int status) = 0;

 private:
  std::unique_ptr<ops::DeviceAllReduce> device_;
  int64_t gradient_bucket_bytes_ = int64_t(25) << 20;  // PyTorch DDP's default
};

// Sums a buffer between ranks in buckets, from its end back, as its tail is done: the
// gradients of a backward, which finishes the last block first. done_from(offset) says that
// [offset, n) will not change any more; a bucket is summed once it holds at least the
// collective's gradient_bucket_bytes(), and done_from(0) sums what is left. On GPUs
// with a device all-reduce the sums overlap the backward of the earlier blocks; every
// rank's buckets are the same, so a step's sums are the same on every run.
template <typename T>
class BucketedSum {
 public:
  BucketedSum(Collective& collective, const ops::Memory& memory, T* data, int64_t n)
      : collective_(collective), memory_(memory), data_(data), end_(n),
        bucket_bytes_(collective.gradient_bucket_bytes()) {}

  void done_from(int64_t offset) {
    if (offset > 0 && (end_ - offset) * int64_t(sizeof(T)) < bucket_bytes_) return;
    if (end_ > offset) collective_.allreduce_sum_in(memory_, data_ + offset, end_ - offset);
    end_ = offset;
  }

 private:
  Collective& collective_;
  const ops::Memory& memory_;
  T* data_;
  int64_t end_;  // [end_, n) is summed or being summed
  int64_t bucket_bytes_;
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

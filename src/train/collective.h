#pragma once
// The few collective operations data-parallel training needs, behind a small interface: a
// single-process implementation, an MPI one (CPU processes, one node or many), and later
// NCCL for GPUs. Every rank calls the same operations in the same order.
#include <cstdint>
#include <memory>

namespace sps {

class Collective {
 public:
  virtual ~Collective() = default;
  virtual int rank() const = 0;
  virtual int size() const = 0;
  // In place: every rank ends with the element-wise sum over ranks (the same bits on every
  // rank).
  virtual void allreduce_sum(float* data, int64_t n) = 0;
  virtual void allreduce_sum(double* data, int64_t n) = 0;
  // `bytes` bytes from `root` to every rank.
  virtual void broadcast(void* data, int64_t bytes, int root) = 0;
  virtual void barrier() = 0;
  // Ends every rank's process with `status` (a failure on one rank must not leave the
  // others waiting in a collective).
  [[noreturn]] virtual void abort(int status) = 0;
};

// One process, no communication.
std::unique_ptr<Collective> make_single_process_collective();

// MPI when this process was started by an MPI launcher (mpirun/mpiexec/srun set
// OMPI_COMM_WORLD_SIZE, PMI_SIZE or PMIX_RANK), else the single-process one: a plain
// `sps train` never initialises MPI. MPI is finalised when the object is destroyed.
std::unique_ptr<Collective> make_collective();

// True when the environment says an MPI launcher started this process.
bool launched_by_mpi();

}  // namespace sps

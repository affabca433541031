#include "train/collective.h"

#include <mpi.h>

#include <climits>
#include <cstdlib>

#include "util/error.h"

namespace sps {

namespace {

class SingleProcess final : public Collective {
 public:
  int rank() const override { return 0; }
  int size() const override { return 1; }
  int local_rank() const override { return 0; }
  void allreduce_sum(float*, int64_t) override {}
  void allreduce_sum(double*, int64_t) override {}
  void broadcast(void*, int64_t, int) override {}
  void barrier() override {}
  [[noreturn]] void abort(int status) override { std::exit(status); }
};

class Mpi final : public Collective {
 public:
  Mpi() {
    int initialized = 0;
    MPI_Initialized(&initialized);
    if (!initialized) {
      int provided = 0;
      // Only the main thread calls MPI (OpenMP threads never do).
      if (MPI_Init_thread(nullptr, nullptr, MPI_THREAD_FUNNELED, &provided) != MPI_SUCCESS)
        fail("MPI_Init_thread failed (launched by mpirun, but MPI cannot start)");
      owns_ = true;
    }
    MPI_Comm_rank(MPI_COMM_WORLD, &rank_);
    MPI_Comm_size(MPI_COMM_WORLD, &size_);
    MPI_Comm machine = MPI_COMM_NULL;  // the processes that share this one's memory
    check(MPI_Comm_split_type(MPI_COMM_WORLD, MPI_COMM_TYPE_SHARED, rank_, MPI_INFO_NULL, &machine),
          "MPI_Comm_split_type");
    MPI_Comm_rank(machine, &local_rank_);
    MPI_Comm_free(&machine);
  }
  ~Mpi() override {
    int finalized = 0;
    MPI_Finalized(&finalized);
    if (owns_ && !finalized) MPI_Finalize();
  }
  int rank() const override { return rank_; }
  int size() const override { return size_; }
  int local_rank() const override { return local_rank_; }
  void allreduce_sum(float* data, int64_t n) override { reduce(data, n, MPI_FLOAT); }
  void allreduce_sum(double* data, int64_t n) override { reduce(data, n, MPI_DOUBLE); }
  void broadcast(void* data, int64_t bytes, int root) override {
    char* p = static_cast<char*>(data);
    for (int64_t done = 0; done < bytes;) {  // MPI counts are int
      const int count = int(std::min<int64_t>(bytes - done, INT_MAX / 2));
      check(MPI_Bcast(p + done, count, MPI_BYTE, root, MPI_COMM_WORLD), "MPI_Bcast");
      done += count;
    }
  }
  void barrier() override { check(MPI_Barrier(MPI_COMM_WORLD), "MPI_Barrier"); }
  [[noreturn]] void abort(int status) override {
    MPI_Abort(MPI_COMM_WORLD, status);
    std::exit(status);
  }

 private:
  template <typename T>
  void reduce(T* data, int64_t n, MPI_Datatype type) {
    for (int64_t done = 0; done < n;) {
      const int count = int(std::min<int64_t>(n - done, INT_MAX / 2));
      check(MPI_Allreduce(MPI_IN_PLACE, data + done, count, type, MPI_SUM, MPI_COMM_WORLD),
            "MPI_Allreduce");
      done += count;
    }
  }
  static void check(int code, const char* what) {
    if (code != MPI_SUCCESS) fail("{} failed (MPI error {})", what, code);
  }
  int rank_ = 0, size_ = 1, local_rank_ = 0;
  bool owns_ = false;
};

}  // namespace

bool launched_by_mpi() {
  for (const char* name : {"OMPI_COMM_WORLD_SIZE", "PMI_SIZE", "PMIX_RANK"})
    if (const char* value = std::getenv(name); value && *value) return true;
  return false;
}

std::unique_ptr<Collective> make_single_process_collective() {
  return std::make_unique<SingleProcess>();
}

std::unique_ptr<Collective> make_collective() {
  if (launched_by_mpi()) return std::make_unique<Mpi>();
  return make_single_process_collective();
}

ops::Device process_device(const std::string& text, const std::string& what,
                           const Collective& collective) {
  ops::Device device = ops::parse_device(text, what);
  if (ops::device_of_local_rank(text)) device.index = collective.local_rank();
  return device;
}

}  // namespace sps

#pragma once
// The backend boundary: one device's memory and the ops of ops.h on it, chosen at run time.
// The model, the optimizer and the decoders hold a Backend and keep every tensor in
// DeviceBuffers it allocated, so the same code runs on the CPU (cpu_backend, the reference)
// and on a GPU (backend_for(cuda:N)). Pointers passed to the ops are the backend's memory;
// host arrays cross with upload and download.
#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <new>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

#include "ops/device.h"
#include "ops/op_list.h"
#include "ops/ops.h"
#include "util/error.h"
#include "util/process_stats.h"

namespace sps::ops {

// Sums a float buffer of a backend's memory over the processes of a job, each on its own
// device, in place and without host copies (NCCL between GPUs). Every process calls it for
// the same sizes in the same order.
class DeviceAllReduce {
 public:
  virtual ~DeviceAllReduce() = default;
  // Starts the sum once the backend's ops issued so far have written `data`; it may run
  // beside the backend's later ops until wait().
  virtual void sum(float* data, int64_t n) = 0;
  // The backend's ops issued from now on start after every sum started so far.
  virtual void wait() = 0;
};

// What setting one up needs from the job: this process's rank of `size`, a host broadcast
// from rank 0, and an agreement (true on every process when every process says true).
struct JobLink {
  int rank = 0, size = 1;
  std::function<void(void* data, size_t bytes)> broadcast;
  std::function<bool(bool mine)> all;
};

// One device's memory. Calls are ordered: a download returns once every earlier op of the
// backend has finished, so the host may read what it copied.
class Memory {
 public:
  virtual ~Memory() = default;
  virtual Device device() const = 0;
  // A thread other than the one that made this backend calls this before anything else
  // (a GPU runtime keeps the current device per thread); nothing to do on the CPU.
  virtual void use_on_this_thread() const {}
  // True when the host can read and write this memory through its pointers (the CPU).
  virtual bool host_accessible() const = 0;
  // `bytes` uninitialised bytes, 64-byte aligned; a UserError when they do not fit.
  virtual void* allocate(size_t bytes) const = 0;
  virtual void release(void* pointer) const = 0;
  virtual void copy(void* to, const void* from, size_t bytes) const = 0;  // both on this device
  virtual void upload(void* to, const void* host, size_t bytes) const = 0;
  virtual void download(void* host, const void* from, size_t bytes) const = 0;
  // Bytes this process can still allocate here; -1 when unknown.
  virtual int64_t available_bytes() const = 0;
  // A DeviceAllReduce between the job's processes, one device each; null with `why` set
  // where this backend has none here (the CPU's memory is reduced by MPI directly). Every
  // process of the job calls it together.
  virtual std::unique_ptr<DeviceAllReduce> device_all_reduce(const JobLink& job,
                                                             std::string* why) const {
    *why = "the " + device().name() + " backend reduces through the host";
    return nullptr;
  }

  // Refuses (UserError, one line) `bytes` for `what` when more than is available here.
  void require(__int128 bytes, const std::string& what) const {
    require_memory(bytes, what, available_bytes(), host_accessible() ? "" : device().name());
  }
};

// An array of n elements in a Memory, uninitialised when (re)sized: never zero-filled, so
// the pages a smaller shape never writes are never touched. Move-only.
template <typename E>
class DeviceBuffer {
 public:
  DeviceBuffer() = default;
  explicit DeviceBuffer(const Memory& memory) : memory_(&memory) {}
  DeviceBuffer(DeviceBuffer&& other) noexcept { swap(other); }
  DeviceBuffer& operator=(DeviceBuffer&& other) noexcept {
    swap(other);
    return *this;
  }
  ~DeviceBuffer() { reset(0); }

  // n elements, uninitialised; the old contents are dropped.
  void reset(size_t n) {
    if (data_) memory_->release(data_);
    data_ = nullptr;
    size_ = 0;
    if (n == 0) return;
    if (n > SIZE_MAX / sizeof(E)) throw std::bad_alloc();
    data_ = static_cast<E*>(memory_->allocate(n * sizeof(E)));
    size_ = n;
  }
  // Grows to at least n elements (contents dropped when it grows).
  void reserve(size_t n) {
    if (n > size_) reset(n);
  }
  // The first n elements from the host, growing to n when smaller.
  void upload(const E* host, size_t n) {
    reserve(n);
    if (n) memory_->upload(data_, host, n * sizeof(E));
  }
  void download(E* host, size_t n, size_t offset = 0) const {
    if (n) memory_->download(host, data_ + offset, n * sizeof(E));
  }

  E* data() { return data_; }
  const E* data() const { return data_; }
  size_t size() const { return size_; }
  const Memory& memory() const { return *memory_; }

 private:
  void swap(DeviceBuffer& other) {
    std::swap(memory_, other.memory_);
    std::swap(data_, other.data_);
    std::swap(size_, other.size_);
  }
  const Memory* memory_ = nullptr;
  E* data_ = nullptr;
  size_t size_ = 0;
};

// Runs use(host) on n elements at `data` in `memory` as host memory: the array itself when
// the host can reach it, else a host copy, downloaded first unless `access` is write and
// uploaded afterwards unless it is read (a const array is only read). For file and MPI I/O
// of device tensors.
enum class HostAccess { read, write, read_write };
template <typename E, typename Use>
void on_host(const Memory& memory, E* data, size_t n, HostAccess access, Use&& use) {
  if (memory.host_accessible()) {
    use(data);
    return;
  }
  std::vector<std::remove_const_t<E>> host(n);
  if (access != HostAccess::write) memory.download(host.data(), data, n * sizeof(E));
  use(static_cast<E*>(host.data()));
  if constexpr (!std::is_const_v<E>)
    if (access != HostAccess::read) memory.upload(data, host.data(), n * sizeof(E));
}

// The weights of a model as a backend's GEMMs read them. A backend whose GEMMs take other
// operands than the weights themselves (bf16 precision: rounded copies, in its GEMM's layout)
// keeps a copy of each weight matrix inside [weights, weights + n) that its linear ops are
// handed, made by the first GEMM that reads the matrix after changed() and reused until the
// next changed(): once per optimizer step, however many micro-batches and GEMMs read it. The
// owner of the weights calls changed() after every write to them (Model does, whenever its
// weights are handed out for writing); a matrix outside every registered buffer is converted
// by each GEMM that reads it. The copies go with this object.
class GemmWeightCopies {
 public:
  virtual ~GemmWeightCopies() = default;
  virtual void changed() = 0;
  // Weight matrices converted so far (a count for the tests and benchmarks).
  virtual int64_t conversions() const = 0;
};

// The ops of op_list.h on one device, for element type T (the CUDA backend has float only).
template <typename T>
class Backend : public Memory {
 public:
  // Copies of the weights [n] at `weights` for this backend's GEMMs (GemmWeightCopies), or
  // null where its GEMMs read the weights as they are.
  virtual std::unique_ptr<GemmWeightCopies> gemm_weight_copies(const T* weights, int64_t n) const {
    return nullptr;
  }
  // One line on how this backend's linear GEMMs run where that is worth saying (bf16 on the
  // CPU: which path was chosen, and why), else empty.
  virtual std::string describe_gemms() const { return ""; }

  // Capabilities the model reads before it calls the ops below, 0 where the backend has none:
  // the row count of its packed inference layout's panels (ops.h; with none the weights stay
  // in rows and the packed ops are never called); the run length of the rows grouped by token
  // (ops.h TokenRows) its embedding_backward reads as by_token; the tile size of the plan
  // (attention_plan.h) its attention reads from AttentionLayout::tile_kinds.
  virtual int64_t packed_panel_rows() const { return 0; }
  virtual int64_t embedding_run_rows() const { return 0; }
  virtual int64_t attention_tile() const { return 0; }

  // The ops of op_list.h, each with the contract of its namesake in ops.h.
  SPS_BACKEND_OPS(SPS_DECLARE_BACKEND_OP)

  // The GEMM rate `sps bench` holds work against: `repeats` products out[n, n] = a · bᵀ
  // (linear_forward's, a and b [n, n] in this memory), the seconds of each, timed to its end.
  // A backend that prepares operands (a GPU's bf16 copies) prepares them once, before the
  // first product, so only the GEMMs are timed.
  virtual std::vector<double> time_gemm(T* out, const T* a, const T* b, int64_t n,
                                        int repeats) const {
    std::vector<double> seconds;
    for (int r = 0; r < repeats; ++r) {
      const double start = now_seconds();
      linear_forward(out, a, b, n, n, n, false);
      T probe;
      download(&probe, out, sizeof probe);  // returns once the product is done
      seconds.push_back(now_seconds() - start);
    }
    return seconds;
  }
};

// The CPU backend: host memory and the ops of ops/cpu, the reference for every other.
template <typename T>
const Backend<T>& cpu_backend();

// The CPU backend of float with GEMM operands of `precision` (ops.h Precision).
const Backend<float>& cpu_backend(Precision precision);

// The backend of `device` (float: the element type of every device) with GEMM operands of
// `precision`. For a GPU, makes it the calling thread's current device. A UserError when this
// build or machine has no such device.
const Backend<float>& backend_for(const Device& device, Precision precision = Precision::fp32);

}  // namespace sps::ops

// Which device a training process takes (under several processes `cuda` is the GPU of the
// process's local rank, an explicit index the same GPU for every process), and where its
// gradients are summed (on the devices when given a device all-reduce, else on the host).
#include <gtest/gtest.h>

#include <cstdlib>
#include <cstring>
#include <vector>

#include "train/collective.h"
#include "util/error.h"

namespace sps {
namespace {

// The third process of a machine, as far as the device choice can tell.
class ThirdOnItsMachine final : public Collective {
 public:
  int rank() const override { return 5; }
  int size() const override { return 8; }
  int local_rank() const override { return 2; }
  // Stand-ins that mark which path summed a buffer: the host doubles it.
  void allreduce_sum(float* data, int64_t n) override {
    for (int64_t i = 0; i < n; ++i) data[i] *= 2;
  }
  void allreduce_sum(double* data, int64_t n) override {
    for (int64_t i = 0; i < n; ++i) data[i] *= 2;
  }
  void broadcast(void*, int64_t, int) override {}
  void barrier() override {}
  [[noreturn]] void abort(int status) override { std::exit(status); }
};

TEST(ProcessDevice, CudaWithoutIndexIsTheGpuOfTheLocalRank) {
  const ThirdOnItsMachine third;
  EXPECT_EQ(process_device("cuda", "system.device", third).name(), "cuda:2");
  EXPECT_EQ(process_device("cuda:0", "system.device", third).name(), "cuda:0");
  EXPECT_EQ(process_device("cuda:7", "system.device", third).name(), "cuda:7");
  EXPECT_EQ(process_device("cpu", "system.device", third).name(), "cpu");
  const auto single = make_single_process_collective();
  EXPECT_EQ(single->local_rank(), 0);
  EXPECT_EQ(process_device("cuda", "system.device", *single).name(), "cuda:0");
  EXPECT_THROW(process_device("gpu", "system.device", third), UserError);
}

// Host memory that says it is not: the host path must go through upload and download.
class OffHostMemory final : public ops::Memory {
 public:
  ops::Device device() const override { return {"cuda", 0}; }
  bool host_accessible() const override { return false; }
  void* allocate(size_t bytes) const override { return std::malloc(bytes); }
  void release(void* pointer) const override { std::free(pointer); }
  void copy(void* to, const void* from, size_t bytes) const override {
    std::memcpy(to, from, bytes);
  }
  void upload(void* to, const void* host, size_t bytes) const override {
    std::memcpy(to, host, bytes);
  }
  void download(void* host, const void* from, size_t bytes) const override {
    std::memcpy(host, from, bytes);
  }
  int64_t available_bytes() const override { return -1; }
};

// The device path adds 100 to each element, and counts the waits.
class AddHundred final : public ops::DeviceAllReduce {
 public:
  explicit AddHundred(int* waits) : waits_(waits) {}
  void sum(float* data, int64_t n) override {
    for (int64_t i = 0; i < n; ++i) data[i] += 100;
  }
  void wait() override { ++*waits_; }

 private:
  int* waits_;
};

TEST(CollectiveSum, DeviceBuffersGoToTheDeviceAllReduceWhenThereIsOne) {
  ThirdOnItsMachine collective;
  const OffHostMemory off_host;
  const ops::Memory& cpu = ops::cpu_backend<float>();
  std::vector<float> values = {1, 2};
  std::vector<double> wide = {1, 2};
  collective.allreduce_sum_in(off_host, values.data(), 2);  // no device all-reduce yet
  EXPECT_EQ(values, (std::vector<float>{2, 4}));
  int waits = 0;
  collective.wait_for_sums();  // nothing to wait for without a device all-reduce
  collective.use_device_all_reduce(std::make_unique<AddHundred>(&waits));
  collective.allreduce_sum_in(off_host, values.data(), 2);
  EXPECT_EQ(values, (std::vector<float>{102, 104}));
  collective.wait_for_sums();
  EXPECT_EQ(waits, 1);
  collective.allreduce_sum_in(cpu, values.data(), 2);  // host memory: MPI sums it directly
  EXPECT_EQ(values, (std::vector<float>{204, 208}));
  collective.allreduce_sum_in(off_host, wide.data(), 2);  // only float buffers go to the device
  EXPECT_EQ(wide, (std::vector<double>{2, 4}));
}

// Buckets from the end back, each summed once it reaches the size, the rest at offset 0:
// every element summed exactly once, none before it was done.
TEST(BucketedSum, SumsEachElementOnceInBucketsFromTheEnd) {
  ThirdOnItsMachine collective;  // its host sum doubles a buffer
  const ops::Memory& cpu = ops::cpu_backend<float>();
  std::vector<float> values(100, 1.0f);
  collective.set_gradient_bucket_bytes(20 * sizeof(float));
  BucketedSum<float> sum(collective, cpu, values.data(), 100);
  sum.done_from(90);  // 10 elements: not yet a bucket
  EXPECT_EQ(values[95], 1.0f);
  sum.done_from(75);  // 25: one bucket
  EXPECT_EQ(values[75], 2.0f);
  EXPECT_EQ(values[99], 2.0f);
  EXPECT_EQ(values[74], 1.0f);
  values[74] = 3.0f;  // still being written: not summed yet
  sum.done_from(60);  // 15 more: not yet
  sum.done_from(0);   // the rest
  EXPECT_EQ(values[74], 6.0f);
  values[74] = 2.0f;
  for (float v : values) EXPECT_EQ(v, 2.0f);
}

}  // namespace
}  // namespace sps

// Which device a training process takes: under several processes `cuda` is the GPU of the
// process's local rank, an explicit index the same GPU for every process.
#include <gtest/gtest.h>

#include <cstdlib>

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
  void allreduce_sum(float*, int64_t) override {}
  void allreduce_sum(double*, int64_t) override {}
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

}  // namespace
}  // namespace sps

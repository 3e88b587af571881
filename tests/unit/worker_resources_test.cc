// Resource discovery that does not depend on the machine: CUDA_VISIBLE_DEVICES and
// /dev/nvidia* parsing.
#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>

#include "worker/resources.h"

namespace convoy {
namespace {

TEST(VisibleGpusTest, CudaVisibleDevicesAsCudaReadsIt) {
  using V = std::vector<int>;
  EXPECT_EQ(VisibleGpus(std::string("0,2")), (V{0, 2}));
  EXPECT_EQ(VisibleGpus(std::string(" 1 , 3")), (V{1, 3}));
  EXPECT_EQ(VisibleGpus(std::string("")), V{});
  EXPECT_EQ(VisibleGpus(std::string("-1")), V{});
  EXPECT_EQ(VisibleGpus(std::string("0,-1,2")), V{0});  // stops at the first invalid
  EXPECT_EQ(VisibleGpus(std::string("GPU-8f3c,GPU-77aa")), (V{0, 1}));
  EXPECT_EQ(VisibleGpus(std::string("99999999999")), V{});  // no overflow
}

TEST(VisibleGpusTest, DeviceFiles) {
  const auto dir =
      std::filesystem::temp_directory_path() / ("convoy-gpus-" + std::to_string(getpid()));
  std::filesystem::create_directories(dir);
  for (const char* name : {"nvidia0", "nvidia1", "nvidiactl", "nvidia-uvm", "nvidia12"}) {
    std::ofstream(dir / name) << "";
  }
  EXPECT_EQ(VisibleGpus(std::nullopt, dir.string()), (std::vector<int>{0, 1, 12}));
  EXPECT_TRUE(VisibleGpus(std::nullopt, (dir / "missing").string()).empty());
  std::filesystem::remove_all(dir);
}

TEST(ResourcesTest, MachineFactsAreSane) {
  EXPECT_GE(UsableCores(), 1);
  EXPECT_FALSE(FirstNonLoopbackIpv4().empty());
  EXPECT_FALSE(HostName().empty());
  EXPECT_TRUE(std::filesystem::exists(SelfDirectory()));
}

}  // namespace
}  // namespace convoy

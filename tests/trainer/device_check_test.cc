// `convoy-trainer --check-devices`, the tiny kernel of a worker's GPU health check
// (trainer/device_check.h): a bad list is refused, and each device's verdict is one line.
#include "trainer/device_check.h"

#include <gtest/gtest.h>

#include <iostream>
#include <sstream>

namespace convoy::trainer {
namespace device_check_test {

// What CheckDevices printed, and its exit code.
std::pair<int, std::string> Check(const std::string& indices) {
  std::ostringstream out;
  std::streambuf* old = std::cout.rdbuf(out.rdbuf());
  const int code = CheckDevices(indices);
  std::cout.rdbuf(old);
  return {code, out.str()};
}

TEST(DeviceCheckTest, ABadListIsRefused) {
  for (const char* bad : {"", "1,,2", "-1", "a", "0,", "99999"}) {
    EXPECT_EQ(Check(bad).first, 2) << bad;
  }
}

TEST(DeviceCheckTest, EachDeviceGetsAVerdict) {
  const auto [code, out] = Check("0,1");
#ifdef CONVOY_CUDA_LIBTORCH
  // A GPU machine: the devices CUDA sees pass, the others are named.
  EXPECT_NE(out.find("gpu 0: "), std::string::npos) << out;
  EXPECT_NE(out.find("gpu 1: "), std::string::npos) << out;
  (void)code;
#else
  EXPECT_EQ(code, 0);
  EXPECT_EQ(out, "LibTorch without CUDA: no kernel run on GPU(s) 0,1\n");
#endif
}

}  // namespace device_check_test
}  // namespace convoy::trainer

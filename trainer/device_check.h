// `convoy-trainer --check-devices 0,1`: the tiny kernel of a worker's health check on each of
// its GPUs (README "When nodes are sick"). For each index it runs a 16x16 matrix product on
// the device and compares it with the same product on the CPU; a device CUDA cannot see, an
// error, or a wrong result fails it. One line per device on stdout ("gpu 1: ok (0.4 ms)",
// "gpu 2: a 16x16 matmul gave a wrong result (max error 3.1e+02)"), which the worker shows as
// the check's reason. Exit 0 when every device passed, 1 when one failed, 2 for a bad list.
// A LibTorch built without CUDA (Debian's) runs no kernel and passes, saying so.
#pragma once

#include <string>

namespace convoy::trainer {

int CheckDevices(const std::string& indices);

}  // namespace convoy::trainer

// convoy-trainer: DDP training of the registered models on Fashion-MNIST, started by a
// convoy-worker (or torchrun, or by hand) with the torchrun environment.
#include <iostream>

#include "trainer/options.h"
#include "trainer/train.h"

int main(int argc, char** argv) {
  convoy::trainer::Options options;
  const std::string err = convoy::trainer::ParseOptions(argc, argv, &options);
  if (!err.empty()) {
    std::cerr << "convoy-trainer: " << err << std::endl;
    return 2;
  }
  try {
    return convoy::trainer::Run(options);
  } catch (const std::exception& e) {
    std::cerr << "convoy-trainer: error: " << e.what() << std::endl;
    return 1;
  }
}

#include "trainer/checkpoint.h"

#include <fcntl.h>
#include <torch/torch.h>
#include <unistd.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <sstream>

namespace convoy::trainer {
namespace fs = std::filesystem;

std::string SaveState(torch::nn::Module& model, torch::optim::Optimizer& optimizer,
                      const Position& pos, int64_t seed) {
  torch::serialize::OutputArchive root, m, o;
  model.save(m);
  optimizer.save(o);
  root.write("model", m);
  root.write("optimizer", o);
  root.write("position",
             torch::tensor({pos.epoch, pos.step_in_epoch, pos.global_step, seed}, torch::kInt64));
  std::ostringstream out;
  root.save_to(out);
  return out.str();
}

Position LoadState(const std::string& bytes, torch::nn::Module& model,
                   torch::optim::Optimizer& optimizer) {
  std::istringstream in(bytes);
  torch::serialize::InputArchive root, m, o;
  root.load_from(in);
  root.read("model", m);
  root.read("optimizer", o);
  torch::Tensor p;
  root.read("position", p);
  if (p.numel() != 4) throw std::runtime_error("checkpoint: bad position record");
  model.load(m);
  optimizer.load(o);
  auto a = p.accessor<int64_t, 1>();
  return Position{a[0], a[1], a[2]};
}

std::string WriteCheckpoint(const std::string& dir, const std::string& bytes, int64_t step) {
  fs::create_directories(dir);
  char name[64];
  std::snprintf(name, sizeof(name), "ckpt-%012lld.pt", static_cast<long long>(step));
  const std::string path = dir + "/" + name;
  const std::string tmp = path + ".tmp";
  int fd = open(tmp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd < 0) throw std::runtime_error(tmp + ": cannot create");
  size_t done = 0;
  while (done < bytes.size()) {
    ssize_t n = write(fd, bytes.data() + done, bytes.size() - done);
    if (n <= 0) {
      close(fd);
      throw std::runtime_error(tmp + ": write failed");
    }
    done += static_cast<size_t>(n);
  }
  fsync(fd);
  close(fd);
  fs::rename(tmp, path);
  if (int dfd = open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC); dfd >= 0) {
    fsync(dfd);
    close(dfd);
  }
  std::vector<std::string> all;
  for (const auto& e : fs::directory_iterator(dir)) {
    const std::string f = e.path().filename().string();
    if (f.rfind("ckpt-", 0) == 0 && f.size() > 3 && f.substr(f.size() - 3) == ".pt") {
      all.push_back(e.path().string());
    }
  }
  std::sort(all.begin(), all.end());
  for (size_t i = 0; i + 2 < all.size(); ++i) fs::remove(all[i]);
  return path;
}

std::optional<std::string> ReadNewestValid(const std::string& dir,
                                           const std::function<void(const std::string&)>& probe) {
  std::error_code ec;
  if (dir.empty() || !fs::is_directory(dir, ec)) return std::nullopt;
  std::vector<std::string> all;
  for (const auto& e : fs::directory_iterator(dir, ec)) {
    const std::string f = e.path().filename().string();
    if (f.rfind("ckpt-", 0) == 0 && f.size() > 3 && f.substr(f.size() - 3) == ".pt") {
      all.push_back(e.path().string());
    }
  }
  std::sort(all.rbegin(), all.rend());
  for (const std::string& path : all) {
    std::ifstream in(path, std::ios::binary);
    std::string bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    try {
      probe(bytes);
      std::cout << "resuming from checkpoint " << path << std::endl;
      return bytes;
    } catch (const std::exception& e) {
      std::cerr << "warning: skipping corrupt checkpoint " << path << ": "
                << std::string(e.what()).substr(0, 200) << std::endl;
    }
  }
  return std::nullopt;
}

}  // namespace convoy::trainer

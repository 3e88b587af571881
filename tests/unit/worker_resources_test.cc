// Resource discovery that does not depend on the machine: CUDA_VISIBLE_DEVICES, /dev/nvidia*,
// /proc/driver/nvidia, /proc/meminfo and cgroup limits (fake trees in a temp dir), NVML's
// answer (a fake list), --gpus, --memory and --label.
#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>

#include "worker/daemon/flags.h"
#include "worker/host/resources.h"

namespace convoy {
namespace worker_resources_test {

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

// A temp directory, removed at the end of the test.
class TempTree {
 public:
  TempTree()
      : root_(std::filesystem::temp_directory_path() /
              ("convoy-res-" + std::to_string(getpid()) + "-" +
               ::testing::UnitTest::GetInstance()->current_test_info()->name())) {
    std::filesystem::remove_all(root_);
    std::filesystem::create_directories(root_);
  }
  ~TempTree() { std::filesystem::remove_all(root_); }
  std::string Write(const std::string& rel, const std::string& text) const {
    const auto path = root_ / rel;
    std::filesystem::create_directories(path.parent_path());
    std::ofstream(path) << text;
    return path.string();
  }
  std::string path(const std::string& rel = "") const { return (root_ / rel).string(); }

 private:
  std::filesystem::path root_;
};

// What /proc/driver/nvidia/gpus/<bus>/information says (driver 535, trimmed).
std::string Information(const std::string& model, const std::string& uuid, int minor) {
  return "Model: \t\t " + model + "\nIRQ:   \t\t 236\nGPU UUID: \t " + uuid +
         "\nVideo BIOS: \t 96.00.74.00.01\nBus Type: \t PCIe\nDMA Size: \t 52 bits\n"
         "Device Minor: \t " +
         std::to_string(minor) + "\nGPU Excluded:\t No\n";
}

TEST(VisibleGpusTest, UuidsAreTheIndicesOfTheDevicesThatHaveThem) {
  const std::vector<GpuDeviceInfo> known = {{0, "A", 0, "GPU-aaaa-1111"},
                                            {1, "B", 0, "GPU-bbbb-2222"}};
  EXPECT_EQ(VisibleGpus(std::string("GPU-bbbb-2222,GPU-aaaa"), "/dev", known),
            (std::vector<int>{1, 0}));
  EXPECT_EQ(VisibleGpus(std::string("GPU-cccc"), "/dev", known), (std::vector<int>{0}));
}

TEST(ResourcesTest, MemoryIsMemTotalLoweredToTheCgroupLimit) {
  TempTree t;
  t.Write("proc/meminfo", "MemTotal:       24523456 kB\nMemFree:        1000 kB\n");
  EXPECT_EQ(UsableMemoryBytes(t.path("proc"), t.path("cgroup")), int64_t{24523456} * 1024);
  // cgroup v2: the worker's unit has no limit, its slice has 8 GiB.
  t.Write("proc/self/cgroup", "0::/system.slice/convoy-worker.service\n");
  t.Write("cgroup/system.slice/convoy-worker.service/memory.max", "max\n");
  t.Write("cgroup/system.slice/memory.max", "8589934592\n");
  EXPECT_EQ(UsableMemoryBytes(t.path("proc"), t.path("cgroup")), int64_t{8} << 30);
  // A limit larger than the machine changes nothing.
  t.Write("cgroup/system.slice/memory.max", "999999999999999\n");
  EXPECT_EQ(UsableMemoryBytes(t.path("proc"), t.path("cgroup")), int64_t{24523456} * 1024);
  EXPECT_EQ(UsableMemoryBytes(t.path("missing"), t.path("cgroup")), 0);
  EXPECT_GT(UsableMemoryBytes(), 0);  // this machine's
}

TEST(ResourcesTest, ByteSizesAsTheSpecWritesThem) {
  EXPECT_EQ(*ParseByteSize("64Gi", "--memory"), int64_t{64} << 30);
  EXPECT_EQ(*ParseByteSize("512Mi", "--memory"), int64_t{512} << 20);
  EXPECT_EQ(*ParseByteSize("2G", "--memory"), int64_t{2000000000});
  EXPECT_EQ(*ParseByteSize("1Ti", "--memory"), int64_t{1} << 40);
  EXPECT_EQ(*ParseByteSize("4096", "--memory"), 4096);
  for (const char* bad : {"", "Gi", "12X", "1.5Gi", "-1", "0", "64 Gi", "64gi"}) {
    auto r = ParseByteSize(bad, "--memory");
    ASSERT_FALSE(r.ok()) << bad;
    EXPECT_EQ(r.status().message().rfind("--memory", 0), 0u) << r.status().message();
  }
  EXPECT_FALSE(ParseByteSize("99999999999Ti", "--memory").ok());
}

TEST(ResourcesTest, GpusFromTheDriversProcFilesInPciOrder) {
  TempTree t;
  // Listed out of order; the minor numbers are the host's, not the indices.
  t.Write("nvidia/gpus/0000:3b:00.0/information",
          Information("NVIDIA A100-SXM4-40GB", "GPU-bbb", 5));
  t.Write("nvidia/gpus/0000:19:00.0/information",
          Information("NVIDIA A100-SXM4-40GB", "GPU-aaa", 4));
  auto gpus = GpusFromProcDriver(t.path("nvidia"));
  ASSERT_EQ(gpus.size(), 2u);
  EXPECT_EQ(gpus[0].index, 0);
  EXPECT_EQ(gpus[0].model, "NVIDIA A100-SXM4-40GB");
  EXPECT_EQ(gpus[0].uuid, "GPU-aaa");
  EXPECT_EQ(gpus[0].memory_bytes, 0);  // not in those files
  EXPECT_EQ(gpus[1].index, 1);
  EXPECT_EQ(gpus[1].uuid, "GPU-bbb");
  EXPECT_TRUE(GpusFromProcDriver(t.path("none")).empty());
}

TEST(ResourcesTest, OfferedGpusComeFromNvmlThenProcThenDev) {
  TempTree t;
  t.Write("nvidia/gpus/0000:19:00.0/information", Information("NVIDIA H100 PCIe", "GPU-p0", 0));
  t.Write("dev/nvidia0", "");
  t.Write("dev/nvidia1", "");
  GpuSources src;
  src.proc_driver_root = t.path("nvidia");
  src.dev_dir = t.path("dev");
  // NVML first, with memory.
  src.nvml = std::vector<GpuDeviceInfo>{{0, "NVIDIA H100 80GB HBM3", int64_t{80} << 30, "GPU-n0"},
                                        {1, "NVIDIA H100 80GB HBM3", int64_t{80} << 30, "GPU-n1"}};
  auto g = DiscoverGpus(src);
  ASSERT_TRUE(g.ok());
  ASSERT_EQ(g->devices.size(), 2u);
  EXPECT_EQ(g->devices[1].uuid, "GPU-n1");
  EXPECT_EQ(g->devices[1].memory_bytes, int64_t{80} << 30);
  EXPECT_EQ(g->source, "NVML");
  // Without NVML: the driver's files.
  src.nvml.reset();
  g = DiscoverGpus(src);
  ASSERT_TRUE(g.ok());
  ASSERT_EQ(g->devices.size(), 1u);
  EXPECT_EQ(g->devices[0].model, "NVIDIA H100 PCIe");
  // Without either: the device files, indices only.
  src.proc_driver_root = t.path("none");
  g = DiscoverGpus(src);
  ASSERT_TRUE(g.ok());
  ASSERT_EQ(g->devices.size(), 2u);
  EXPECT_EQ(g->devices[1].index, 1);
  EXPECT_EQ(g->devices[1].model, "");
  // Nothing at all.
  src.dev_dir = t.path("none");
  g = DiscoverGpus(src);
  ASSERT_TRUE(g.ok());
  EXPECT_TRUE(g->devices.empty());
  EXPECT_EQ(g->source, "none found");
}

TEST(ResourcesTest, GpusFlagAndCudaVisibleDevicesNarrowWhatIsOffered) {
  GpuSources src;
  src.proc_driver_root = "/nonexistent";
  src.dev_dir = "/nonexistent";
  src.nvml = std::vector<GpuDeviceInfo>{
      {0, "H100", 1, "GPU-n0"}, {1, "H100", 1, "GPU-n1"}, {2, "H100", 1, "GPU-n2"}};
  src.gpus_flag = "2,0";
  auto g = DiscoverGpus(src);
  ASSERT_TRUE(g.ok()) << g.status().message();
  ASSERT_EQ(g->devices.size(), 2u);
  EXPECT_EQ(g->devices[0].index, 2);
  EXPECT_EQ(g->devices[0].uuid, "GPU-n2");
  EXPECT_EQ(g->source, "--gpus 2,0 (NVML)");
  src.gpus_flag = "none";
  EXPECT_TRUE(DiscoverGpus(src)->devices.empty());
  src.gpus_flag = "3";
  g = DiscoverGpus(src);
  ASSERT_FALSE(g.ok());
  EXPECT_EQ(g.status().message(), "--gpus 3: this machine has no GPU 3 (NVML found 0, 1, 2)");
  // --gpus wins over CUDA_VISIBLE_DEVICES; without it, the environment narrows.
  src.gpus_flag = "1";
  src.cuda_visible_devices = "0";
  EXPECT_EQ(DiscoverGpus(src)->devices.at(0).index, 1);
  src.gpus_flag.reset();
  src.cuda_visible_devices = "GPU-n2";
  EXPECT_EQ(DiscoverGpus(src)->devices.at(0).index, 2);
  // No GPU found: --gpus is taken as given (the models are unknown).
  src.nvml.reset();
  src.cuda_visible_devices.reset();
  src.gpus_flag = "0,1";
  g = DiscoverGpus(src);
  ASSERT_TRUE(g.ok());
  EXPECT_EQ(g->devices.size(), 2u);
  for (const char* bad : {"", "a", "0,,1", "-1", "0,0", "1 2"}) {
    auto r = ParseGpuList(bad);
    ASSERT_FALSE(r.ok()) << bad;
    EXPECT_EQ(r.status().message().rfind("--gpus", 0), 0u) << r.status().message();
  }
}

TEST(ResourcesTest, LabelsAreCheckedAndNamedWhenBad) {
  auto ok = ParseLabels({"zone=a", "gpu=h100", "example.com/tier=", "rack=r-12.b"});
  ASSERT_TRUE(ok.ok()) << ok.status().message();
  EXPECT_EQ(ok->at("zone"), "a");
  EXPECT_EQ(ok->at("example.com/tier"), "");
  EXPECT_EQ(ok->size(), 4u);
  EXPECT_EQ(ParseLabels({"zone"}).status().message(),
            "--label 'zone': expected KEY=VALUE, e.g. zone=a");
  EXPECT_EQ(ParseLabels({"bad key=1"}).status().message(),
            "--label 'bad key=1': the key must be 1-253 characters of [A-Za-z0-9._/-] starting "
            "with a letter or digit");
  EXPECT_EQ(ParseLabels({"=1"}).status().message().rfind("--label '=1': the key", 0), 0u);
  EXPECT_EQ(ParseLabels({"zone=a b"}).status().message(),
            "--label 'zone=a b': the value must be at most 63 characters of [A-Za-z0-9._-]");
  EXPECT_EQ(ParseLabels({"zone=a", "zone=b"}).status().message(),
            "--label 'zone=b': zone is given twice");
}

TEST(ResourcesTest, HumanBytes) {
  EXPECT_EQ(HumanBytes(int64_t{64} << 30), "64 GiB");
  EXPECT_EQ(HumanBytes(int64_t{3} << 29), "1.5 GiB");
  EXPECT_EQ(HumanBytes(512), "512 B");
  EXPECT_EQ(HumanBytes(int64_t{80} << 30), "80 GiB");
}

StatusOr<WorkerFlags> Parse(std::vector<std::string> args, int* exit_code) {
  args.insert(args.begin(), {"convoy-worker", "--coordinator", "127.0.0.1:7070", "--name", "w1",
                             "--work-dir", "/tmp/w1", "--insecure"});
  std::vector<char*> argv;
  for (auto& a : args) argv.push_back(a.data());
  WorkerFlags f;
  Status st = ParseWorkerFlags(static_cast<int>(argv.size()), argv.data(), &f, exit_code);
  if (!st.ok()) return st;
  return f;
}

TEST(ResourcesTest, FlagsForMemoryGpusAndLabels) {
  int code = -1;
  auto f = Parse({"--memory", "64Gi", "--gpus", "0,1", "--label", "zone=a", "--label", "gpu=h100"},
                 &code);
  ASSERT_TRUE(f.ok()) << f.status().message();
  EXPECT_EQ(code, 0);
  EXPECT_EQ(f->memory_bytes, int64_t{64} << 30);
  EXPECT_EQ(f->gpus, "0,1");
  EXPECT_EQ(f->label_map, (std::map<std::string, std::string>{{"zone", "a"}, {"gpu", "h100"}}));
  f = Parse({"--label", "zone=a,b"}, &code);
  ASSERT_FALSE(f.ok());
  EXPECT_EQ(code, 2);
  EXPECT_NE(f.status().message().find("--label 'zone=a,b': the value"), std::string::npos);
  f = Parse({"--gpus", "first"}, &code);
  ASSERT_FALSE(f.ok());
  EXPECT_EQ(code, 2);
  f = Parse({"--memory", "lots"}, &code);
  ASSERT_FALSE(f.ok());
  EXPECT_EQ(f.status().message(),
            "--memory: expected a size such as 64Gi, 512Mi, 2G or a number of bytes, got 'lots'");
}

TEST(ResourcesTest, MachineFactsAreSane) {
  EXPECT_GE(UsableCores(), 1);
  EXPECT_FALSE(FirstNonLoopbackIpv4().empty());
  EXPECT_FALSE(HostName().empty());
  EXPECT_TRUE(std::filesystem::exists(SelfDirectory()));
}

}  // namespace worker_resources_test
}  // namespace convoy

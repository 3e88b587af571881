// convoy-bench-submit: the latency of JobService.SubmitJob as a client that stays connected
// sees it (bench/failover.py): one channel to the coordinators given (--coordinator A,B,...:
// whichever accepts, as the CLI finds the leader), then N submits of a one-rank `true` job,
// one after another, each timed from the call to its answer (the coordinator has committed
// the job to its store by then). Prints one JSON line: {"n", "ok", "p50_ms", "p99_ms",
// "max_ms"}. Plain text (the bench's coordinators run --insecure on loopback).
#include <grpcpp/grpcpp.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include "common/coordinator_list.h"
#include "convoy/v1/job.grpc.pb.h"

int main(int argc, char** argv) {
  if (argc != 3) {
    std::fprintf(stderr, "usage: convoy-bench-submit HOST:PORT[,HOST:PORT...] COUNT\n");
    return 2;
  }
  convoy::CoordinatorList coordinators(argv[1]);
  const int count = std::atoi(argv[2]);
  auto channel = coordinators.Connect(
      [](const std::string& one) {
        return grpc::CreateChannel(one, grpc::InsecureChannelCredentials());
      },
      5000);
  auto stub = convoy::v1::JobService::NewStub(channel);
  std::vector<double> ms;
  int ok = 0;
  for (int i = 0; i < count; ++i) {
    convoy::v1::SubmitJobRequest req;
    req.mutable_spec()->set_name("latency-" + std::to_string(i));
    req.mutable_spec()->set_nodes(1);
    req.mutable_spec()->set_procs_per_node(1);
    req.mutable_spec()->add_command("true");
    convoy::v1::SubmitJobResponse resp;
    grpc::ClientContext ctx;
    ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(30));
    const auto t0 = std::chrono::steady_clock::now();
    const grpc::Status st = stub->SubmitJob(&ctx, req, &resp);
    ms.push_back(
        std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count());
    if (st.ok()) {
      ++ok;
    } else {
      std::fprintf(stderr, "submit %d: %s\n", i, st.error_message().c_str());
    }
  }
  std::sort(ms.begin(), ms.end());
  auto pct = [&](double p) {
    return ms.empty() ? 0.0 : ms[std::min(ms.size() - 1, static_cast<size_t>(p * ms.size()))];
  };
  std::printf("{\"n\": %d, \"ok\": %d, \"p50_ms\": %.1f, \"p99_ms\": %.1f, \"max_ms\": %.1f}\n",
              count, ok, pct(0.50), pct(0.99), ms.empty() ? 0.0 : ms.back());
  return ok == count ? 0 : 1;
}

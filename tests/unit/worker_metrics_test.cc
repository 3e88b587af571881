// The worker's /metrics series from a fake supervisor and a fake /proc: per-rank CPU,
// memory and state while a rank runs, only its state once it exited, the totals, and no
// GPU series without NVML. Also /proc of this very process.
#include "worker/daemon/worker_metrics.h"

#include <gtest/gtest.h>
#include <prometheus/text_serializer.h>
#include <unistd.h>

namespace convoy {
namespace worker_metrics_test {

bool Has(const std::string& text, const std::string& line) {
  return text.find(line) != std::string::npos;
}

TEST(WorkerMetrics, RanksCountersAndNoGpuWithoutNvml) {
  std::vector<Supervisor::RankSample> samples = {
      {"j-000001", 1, 0, 4242, true},
      {"j-000001", 0, 0, 4000, false},  // the previous attempt's rank, exited
  };
  Supervisor::Counters counters;
  counters.log_bytes = 1234;
  counters.records_received = 50;
  counters.records_dropped = 2;
  counters.restarts_seen = 1;
  int proc_reads = 0;
  WorkerMetrics metrics(
      "w1", 4, [&] { return samples; }, [&] { return counters; }, nullptr,
      [&](pid_t pid) -> std::optional<ProcUsage> {
        ++proc_reads;
        if (pid != 4242) return std::nullopt;
        ProcUsage u;
        u.state = 'R';
        u.cpu_seconds = 12.5;
        u.rss_bytes = 300 << 20;
        return u;
      });
  const std::string text = prometheus::TextSerializer().Serialize(metrics.Collect());
  EXPECT_EQ(proc_reads, 1) << "exited ranks are not read from /proc";
  const std::string r = "attempt=\"1\",job_id=\"j-000001\",rank=\"0\",worker=\"w1\"";
  EXPECT_TRUE(Has(text, "convoy_worker_rank_cpu_seconds_total{" + r + "} 12.5")) << text;
  EXPECT_TRUE(Has(text, "convoy_worker_rank_resident_memory_bytes{" + r + "} 314572800"));
  EXPECT_TRUE(Has(text,
                  "convoy_worker_rank_state{attempt=\"1\",job_id=\"j-000001\",rank=\"0\","
                  "state=\"running\",worker=\"w1\"} 1"));
  EXPECT_TRUE(Has(text,
                  "convoy_worker_rank_state{attempt=\"0\",job_id=\"j-000001\",rank=\"0\","
                  "state=\"exited\",worker=\"w1\"} 1"));
  EXPECT_FALSE(Has(text, "convoy_worker_rank_cpu_seconds_total{attempt=\"0\""));
  EXPECT_TRUE(Has(text, "convoy_worker_ranks{state=\"running\",worker=\"w1\"} 1"));
  EXPECT_TRUE(Has(text, "convoy_worker_ranks{state=\"exited\",worker=\"w1\"} 1"));
  EXPECT_TRUE(Has(text, "convoy_worker_slots{worker=\"w1\"} 4"));
  EXPECT_TRUE(Has(text, "convoy_worker_log_bytes_total{worker=\"w1\"} 1234"));
  EXPECT_TRUE(Has(text, "convoy_worker_metric_records_received_total{worker=\"w1\"} 50"));
  EXPECT_TRUE(Has(text, "convoy_worker_metric_records_dropped_total{worker=\"w1\"} 2"));
  EXPECT_TRUE(Has(text, "convoy_worker_restarts_seen_total{worker=\"w1\"} 1"));
  EXPECT_TRUE(Has(text, "# TYPE convoy_worker_rank_cpu_seconds_total counter"));
  EXPECT_FALSE(Has(text, "convoy_worker_gpu_"));

  samples.clear();  // the supervisor forgot the attempts: their series go
  const std::string later = prometheus::TextSerializer().Serialize(metrics.Collect());
  EXPECT_FALSE(Has(later, "j-000001")) << later;
}

TEST(WorkerMetrics, ReadsThisProcess) {
  auto u = ReadProcUsage(getpid());
  ASSERT_TRUE(u.has_value());
  EXPECT_EQ(ProcStateName(u->state), "running");
  EXPECT_GT(u->rss_bytes, 0);
  EXPECT_GE(u->cpu_seconds, 0);
  EXPECT_FALSE(ReadProcUsage(0x7ffffff0).has_value());
}

}  // namespace worker_metrics_test
}  // namespace convoy

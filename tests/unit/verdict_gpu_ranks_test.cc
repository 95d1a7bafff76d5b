// Processes that drive several GPUs (nccl-tests -t/-g, ncclCommInitAll): the report's ranks are
// GPU ranks, each on its process (DESIGN.md §3; analyzer/verdict/gpu_ranks.h).
#include <catch2/catch.hpp>
#include <optional>
#include <string>
#include <vector>

#include "hangwatch/verdict/gpu_ranks.h"
#include "hangwatch/verdict/job_loader.h"
#include "hangwatch/verdict/report.h"
#include "hangwatch/verdict/report_builder.h"
#include "verdict_test_fixture.h"

using namespace hangwatch;
using namespace hangwatch::verdict;
using verdict_test::FakeRank;

namespace {

// Rank 3's GPU stopped in AllReduce seq 10 on a 4-rank ring: its connections stop at 80, the
// others reached 83/82 (as verdict_report_test's dead GPU).
std::vector<FakeRank> deadGpuRing() {
  auto delivered = [](int from, int ch) -> std::optional<uint64_t> { return from == 3 || from == 2 ? 80 : 83 + ch; };
  auto consumed = [](int at, int) -> std::optional<uint64_t> { return at == 3 ? 80 : 82; };
  return verdict_test::ringJob(4, 10, 2, delivered, consumed);
}

// The same four GPU ranks as `per_process` processes of `gpus` GPUs each: process p holds GPU
// ranks p*gpus.. with their communicator entries (device = rank), streams, ring progress and
// profiler records; one set of threads per process.
void writeAsProcesses(const std::vector<FakeRank>& gpus_ranks, int gpus, const std::string& dir) {
  const int processes = static_cast<int>(gpus_ranks.size()) / gpus;
  for (int p = 0; p < processes; ++p) {
    FakeRank proc(p, processes, 10);
    proc.snap.identity.device = p * gpus;
    proc.snap.identity.host = "node0";
    proc.snap.comms.clear();
    proc.snap.streams.clear();
    proc.dump.ring_progress.clear();
    proc.snap.progress = SnapshotProgress{};
    for (int g = p * gpus; g < (p + 1) * gpus; ++g) {
      SnapshotComm c = gpus_ranks[g].snap.comms[0];
      c.device = g;
      c.nccl_id = "00000000000000ab";
      proc.snap.comms.push_back(c);
      SnapshotStream st = gpus_ranks[g].snap.streams[0];
      st.stream = "0x" + std::to_string(g + 1);
      st.device = g;
      proc.snap.streams.push_back(st);
      for (RingProgress rp : gpus_ranks[g].dump.ring_progress) {
        rp.comm_rank = g;
        rp.comm_size = 4;
        proc.dump.ring_progress.push_back(rp);
      }
      SnapshotProxyConnection pc;
      pc.nccl_comm = "00000000000000ab";
      pc.rank = g;
      pc.nranks = 4;
      pc.peer = (g + 1) % 4;
      pc.dir = "send";
      proc.snap.progress->connections.push_back(pc);
    }
    // NCCL's profiler keeps one process's kernel channels of a communicator under its id alone.
    proc.snap.progress->kernel_channels.push_back({"00000000000000ab", 0, 5, 4, 1.0, std::nullopt});
    proc.snap.progress->algorithms.push_back({"00000000000000ab", "RING", 10, 1.0});
    proc.write(dir);
  }
}

}  // namespace

TEST_CASE("TwoProcessesOfTwoGpusAreReportedAsFourGpuRanksEachOnItsProcess") {
  verdict_test::TempDir dir;
  writeAsProcesses(deadGpuRing(), 2, dir.path);
  verdict_test::writeTrigger(dir.path, 1, 10);  // process 1 timed out first
  Expected<JobData> job = JobLoader(1).load(dir.path);
  REQUIRE(job.ok());
  CHECK(job->world_size == 4);
  CHECK(job->processes == 2);
  CHECK(job->ranks_missing.empty());
  CHECK(job->gpu_ranks_comm == verdict_test::kComm);
  REQUIRE(job->gpu_ranks.size() == 4);
  REQUIRE(job->ranks.size() == 4);
  for (int g = 0; g < 4; ++g) {
    const GpuRank& m = job->gpu_ranks[g];
    CHECK(m.rank == g);
    CHECK(m.process == g / 2);
    CHECK(m.device == g);
    CHECK(m.pid == 100 + g / 2);
    const RankSummary* s = job->find(g);
    REQUIRE(s != nullptr);
    CHECK(s->launcher_rank == g / 2);
    CHECK(s->device == g);
    REQUIRE(s->comms.size() == 1);
    CHECK(s->comms[0].rank == g);
    REQUIRE(s->pending.size() == 1);  // its own stream's op only
    CHECK(s->pending[0].device == g);
    CHECK(s->ring_progress.size() == 2);  // its two channels
    for (const RingProgress& rp : s->ring_progress) CHECK(rp.comm_rank == g);
    REQUIRE(s->proxy_ends.size() == 1);
    CHECK(s->proxy_ends[0].comm_rank == g);
    CHECK(s->algorithms.size() == 1);   // communicator-wide: each member GPU has it
    CHECK(s->kernel_channels.empty());  // two GPUs' channels under one id: nobody's, not guessed
    CHECK(s->threads.size() == 2);      // the process's threads, on each of its GPUs
  }
  // TRIGGER.json's rank is the launcher's: its process's first GPU rank, the file's kept.
  REQUIRE(job->trigger);
  CHECK(job->trigger->rank == 2);
  CHECK(job->trigger_process == 1);

  CHECK(describeRank(*job, 3) == "rank 3 (host node0, GPU 3, pid 101, process 1)");
  CHECK(gpuRanksText(*job).find("process 0 drives rank(s) 0,1; process 1 drives rank(s) 2,3") != std::string::npos);

  // The verdict on the GPU ranks is the one the same GPUs get as four processes.
  const Verdict v = ReportBuilder::build(std::move(*job)).verdict;
  verdict_test::TempDir single;
  for (const FakeRank& r : deadGpuRing()) r.write(single.path);
  verdict_test::writeTrigger(single.path, 2, 10);
  Expected<JobData> one_each = JobLoader(1).load(single.path);
  REQUIRE(one_each.ok());
  const Verdict u = ReportBuilder::build(std::move(*one_each)).verdict;
  INFO(v.headline);
  CHECK(v.kind == u.kind);
  CHECK(v.confident == u.confident);
  CHECK(v.culprit_ranks == u.culprit_ranks);
  CHECK(v.culprit_ranks == std::vector<int>{3});
  CHECK(v.lacking_data.empty());
}

TEST_CASE("ProcessesOfOneGpuEachKeepTheLaunchersRanks") {
  verdict_test::TempDir dir;
  for (const FakeRank& r : deadGpuRing()) r.write(dir.path);
  Expected<JobData> job = JobLoader(1).load(dir.path);
  REQUIRE(job.ok());
  CHECK(job->gpu_ranks.empty());
  CHECK(job->world_size == 4);
  for (const RankSummary& s : job->ranks) CHECK_FALSE(s.launcher_rank);
}

TEST_CASE("AProcessHoldingNoRankOfTheWidestCommunicatorKeepsTheJobInLauncherRanks") {
  // Process 2 never joined the world communicator: no GPU rank to give it, so nothing is split
  // (and nothing of it is lost).
  verdict_test::TempDir dir;
  std::vector<FakeRank> gpus = deadGpuRing();
  writeAsProcesses(gpus, 2, dir.path);
  FakeRank late(2, 3, 10);
  late.insideInit(verdict_test::kComm, 0, 4);
  late.write(dir.path);
  Expected<JobData> job = JobLoader(1).load(dir.path);
  REQUIRE(job.ok());
  CHECK(job->gpu_ranks.empty());
  CHECK(job->ranks.size() == 3);
}

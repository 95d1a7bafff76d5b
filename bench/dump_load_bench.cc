// What loading a job's dumps could cost in `forensics report`: every rank's two files read,
// parsed and its stacks merged into one StackClassifier, on N threads. Readers: `table` (what
// the report does: both files with the simdjson readers, frames interned into one StackTable
// while parsing, ranks classified by stack id afterwards), `fast` (the simdjson dump reader
// into ThreadStacks, merged under a lock) or `common` (the nlohmann readers).
//   dump_load_bench <job-dir> [--threads N] [--reader table|fast|common]
// Prints wall and CPU seconds, bytes and max RSS, so the report's own figure can be split
// into "reading" and "everything else".
#include <fcntl.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "hangwatch/common/forensics_dump.h"
#include "hangwatch/dumpio/forensics_dump_fast_reader.h"
#include "hangwatch/common/job_layout.h"
#include "hangwatch/stackmerge/stack_table.h"
#include "hangwatch/stackmerge/stack_tree.h"
#include "hangwatch/common/watchdog_snapshot.h"
#include "hangwatch/dumpio/watchdog_snapshot_fast_reader.h"

namespace {

bool readFile(const std::string& path, std::string& out) {
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return false;
  struct stat st {};
  bool ok = ::fstat(fd, &st) == 0;
  out.resize(ok ? static_cast<size_t>(st.st_size) : 0);
  size_t done = 0;
  while (ok && done < out.size()) {
    const ssize_t n = ::read(fd, out.data() + done, out.size() - done);
    if (n <= 0) ok = false;
    else done += static_cast<size_t>(n);
  }
  ::close(fd);
  return ok;
}

double cpuSeconds() {
  rusage ru{};
  getrusage(RUSAGE_SELF, &ru);
  return static_cast<double>(ru.ru_utime.tv_sec + ru.ru_stime.tv_sec) +
         static_cast<double>(ru.ru_utime.tv_usec + ru.ru_stime.tv_usec) / 1e6;
}

// What one bench run reads into, shared by its reader threads.
struct LoadRun {
  std::string job;
  std::vector<int> ranks;
  bool fast = true;
  bool table = true;
  hangwatch::stackmerge::StackClassifier classifier;
  hangwatch::stackmerge::StackTable stacks;
  std::vector<std::vector<hangwatch::stackmerge::RankThread>> rank_threads;
  std::mutex merge;
  std::atomic<size_t> next{0};
  std::atomic<uint64_t> bytes{0};
  std::atomic<int> bad{0};
};

std::vector<int> forensicsRanks(const std::string& job) {
  std::vector<int> ranks;
  for (const auto& e : std::filesystem::directory_iterator(job + "/ranks")) {
    const std::string name = e.path().filename().string();
    if (name.size() > 15 && name[0] == 'r' && name.ends_with(".forensics.json"))
      ranks.push_back(std::stoi(name.substr(1, name.size() - 16)));
  }
  std::sort(ranks.begin(), ranks.end());
  return ranks;
}

// One reader thread: the next rank's snapshot and forensics dump, as the report reads them.
void readRanks(LoadRun& run) {
  std::string text;
  std::vector<uint32_t> ids;
  for (size_t i; (i = run.next.fetch_add(1)) < run.ranks.size();) {
    const int rank = run.ranks[i];
    if (readFile(hangwatch::watchdogSnapshotPath(run.job, rank), text)) {
      run.bytes += text.size();
      if (run.table) {
        if (!hangwatch::dumpio::watchdogSnapshotFromTextFast(text)) ++run.bad;
      } else {
        auto j = nlohmann::json::parse(text, nullptr, false);
        if (j.is_discarded() || !hangwatch::watchdogSnapshotFromJson(j)) ++run.bad;
      }
    }
    if (!readFile(hangwatch::forensicsDumpPath(run.job, rank), text)) continue;
    run.bytes += text.size();
    // As the report reads them: raw frames skipped, the text parsed in place.
    const size_t size = text.size();
    text.resize(size + hangwatch::dumpio::kFastReaderPadding, '\0');
    hangwatch::dumpio::FastReadOptions options{.skip_raw_frames = true};
    if (run.table) {
      options.stacks = &run.stacks;
      options.stack_ids = &ids;
    }
    auto dump = run.fast ? hangwatch::dumpio::forensicsDumpFromPaddedText(std::string_view(text.data(), size), options)
                         : hangwatch::forensicsDumpFromText(text.substr(0, size));
    if (!dump) {
      ++run.bad;
      continue;
    }
    if (run.table) {
      for (size_t t = 0; t < dump->threads.size() && t < ids.size(); ++t)
        run.rank_threads[i].push_back({dump->threads[t].tid, std::move(dump->threads[t].name), ids[t]});
      continue;
    }
    std::lock_guard<std::mutex> lock(run.merge);
    run.classifier.addRank(rank, dump->threads);
  }
}

}  // namespace

int main(int argc, char** argv) {
  const char* usage = "usage: %s <job-dir> [--threads N] [--reader table|fast|common]\n"
                      "Reads every rank's forensics dump of <job-dir> as the report does and prints the time.\n";
  if (argc >= 2 && (std::strcmp(argv[1], "--help") == 0 || std::strcmp(argv[1], "-h") == 0)) {
    std::printf(usage, argv[0]);
    return 0;
  }
  if (argc < 2 || argv[1][0] == '-' || !std::filesystem::is_directory(std::string(argv[1]) + "/ranks")) {
    std::fprintf(stderr, usage, argv[0]);
    if (argc >= 2) std::fprintf(stderr, "%s: no ranks/ folder in '%s'\n", argv[0], argv[1]);
    return 2;
  }
  LoadRun run;
  run.job = argv[1];
  unsigned threads = std::max(1u, std::thread::hardware_concurrency());
  std::string reader = "table";
  for (int i = 2; i + 1 < argc; i += 2) {
    if (std::strcmp(argv[i], "--threads") == 0) threads = static_cast<unsigned>(std::stoi(argv[i + 1]));
    else if (std::strcmp(argv[i], "--reader") == 0) reader = argv[i + 1];
  }
  run.fast = reader != "common";
  run.table = reader == "table";
  run.ranks = forensicsRanks(run.job);
  run.rank_threads.resize(run.ranks.size());

  const auto t0 = std::chrono::steady_clock::now();
  const double cpu0 = cpuSeconds();
  std::vector<std::thread> pool;
  for (unsigned w = 0; w < threads; ++w) pool.emplace_back([&] { readRanks(run); });
  for (auto& t : pool) t.join();
  if (run.table)
    for (size_t i = 0; i < run.ranks.size(); ++i) run.classifier.addRank(run.ranks[i], run.rank_threads[i], run.stacks);
  const auto classes = run.classifier.classes();
  const double wall = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  rusage ru{};
  getrusage(RUSAGE_SELF, &ru);
  std::printf("ranks %zu, %.2f GB, reader %s, %u threads: wall %.2f s, cpu %.2f s, max rss %.0f MB, "
              "%zu stack classes, %zu tree nodes, %d unreadable\n",
              run.ranks.size(), static_cast<double>(run.bytes.load()) / 1e9, reader.c_str(), threads, wall,
              cpuSeconds() - cpu0, static_cast<double>(ru.ru_maxrss) / 1024.0, classes.size(),
              run.classifier.tree().nodes().size(), run.bad.load());
  return 0;
}

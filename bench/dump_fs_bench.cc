// What the storage thread's helper process costs per dump-folder operation: each operation
// once on this process's own file system (the baseline, `local`) and once through
// `forensics io-helper` over its socket (`helper`), in the same run, on a folder in $TMPDIR
// (or /tmp). Compare the pairs as ratios: the watchdog does ~7 such operations a second.
#include <benchmark/benchmark.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <memory>
#include <string>

#include "hangwatch/common/dump_fs.h"
#include "hangwatch/watchdog/io_helper.h"

namespace {

std::string folder() {
  static const std::string dir = [] {
    const char* tmp = std::getenv("TMPDIR");
    std::string d = std::string(tmp && *tmp ? tmp : "/tmp") + "/hangwatch-dump-fs-bench-" + std::to_string(::getpid());
    std::filesystem::create_directories(d + "/ranks");
    return d;
  }();
  return dir;
}

hangwatch::DumpFs& fsFor(int through_helper) {
  static std::unique_ptr<hangwatch::watchdog::IoHelper> helper = [] {
    auto h = hangwatch::watchdog::IoHelper::start(FORENSICS_BINARY, {});
    if (!h) std::abort();
    return std::move(*h);
  }();
  return through_helper ? static_cast<hangwatch::DumpFs&>(*helper) : hangwatch::localDumpFs();
}

void label(benchmark::State& state) { state.SetLabel(state.range(0) ? "helper" : "local"); }

// A rank's state file: a few hundred bytes, written atomically (create, write, fsync, rename).
void BM_WriteStateFile(benchmark::State& state) {
  hangwatch::DumpFs& fs = fsFor(static_cast<int>(state.range(0)));
  const std::string path = folder() + "/ranks/r00000.state.json";
  const std::string text(400, 'x');
  for (auto _ : state) benchmark::DoNotOptimize(fs.writeAtomically(path, text, 0640, {}));
  label(state);
}
BENCHMARK(BM_WriteStateFile)->Arg(0)->Arg(1);

// The trigger look-up the watchdog makes twice a second.
void BM_StatTrigger(benchmark::State& state) {
  hangwatch::DumpFs& fs = fsFor(static_cast<int>(state.range(0)));
  const std::string path = folder() + "/TRIGGER.json";
  for (auto _ : state) benchmark::DoNotOptimize(fs.stat(path));
  label(state);
}
BENCHMARK(BM_StatTrigger)->Arg(0)->Arg(1);

// A metrics line appended to a file kept open.
void BM_AppendMetricsLine(benchmark::State& state) {
  hangwatch::DumpFs& fs = fsFor(static_cast<int>(state.range(0)));
  const std::string path = folder() + "/metrics.jsonl";
  const std::string line(300, 'm');
  for (auto _ : state) benchmark::DoNotOptimize(fs.append(path, line + "\n", 0640, true, false));
  label(state);
}
BENCHMARK(BM_AppendMetricsLine)->Arg(0)->Arg(1);

}  // namespace

int main(int argc, char** argv) {
  benchmark::Initialize(&argc, argv);
  benchmark::RunSpecifiedBenchmarks();
  std::filesystem::remove_all(folder());
  return 0;
}

// StackTree and StackClassifier over a job-sized synthetic rank set (16,384 ranks x 16
// threads x ~30 frames, 1% noisy ranks and one culprit), plus the per-rank dump parse, so
// the report's budget (16,384 ranks in 5 s) can be split between parsing and merging.
#include <benchmark/benchmark.h>

#include <algorithm>
#include <cstring>
#include <string>
#include <vector>

#include "hangwatch/common/forensics_dump.h"
#include "hangwatch/dumpio/forensics_dump_fast_reader.h"
#include "hangwatch/stackmerge/stack_tree.h"

namespace {

using hangwatch::FrameKind;
using hangwatch::StackFrame;
using hangwatch::ThreadStack;
using hangwatch::stackmerge::StackClassifier;
using hangwatch::stackmerge::StackTree;

constexpr int kRanks = 16384;
constexpr int kThreads = 16;
constexpr int kFrames = 30;

StackFrame native(std::string function, const std::string& module, uint64_t offset) {
  StackFrame f;
  f.function = std::move(function);
  f.module = module;
  f.offset = offset;
  f.pc = 0x7f0000000000 + offset;
  return f;
}

StackFrame python(std::string function, std::string file, int line) {
  StackFrame f;
  f.kind = FrameKind::kPython;
  f.function = std::move(function);
  f.file = std::move(file);
  f.line = line;
  return f;
}

// One thread of `kFrames` frames whose innermost `top` frames say where it waits.
ThreadStack makeThread(const std::string& name, const std::vector<StackFrame>& top, bool with_python) {
  ThreadStack t;
  t.name = name;
  t.frames = top;
  for (int i = 0; static_cast<int>(t.frames.size()) < kFrames - 2; ++i) {
    if (with_python && i % 3 == 0)
      t.frames.push_back(python("forward_" + std::to_string(i), "/opt/torch/nn/modules/module.py", 1500 + i));
    else
      t.frames.push_back(native("std::_Function_handler<void (), c10::impl::BoxedKernelWrapper<" + std::to_string(i) +
                                    "> >::_M_invoke(std::_Any_data const&)",
                                "/opt/torch/lib/libtorch_cpu.so", 0x2000000 + 0x40 * i));
  }
  t.frames.push_back(native("start_thread", "/usr/lib/x86_64-linux-gnu/libc.so.6", 0x88fd4));
  t.frames.push_back(native("__clone3", "/usr/lib/x86_64-linux-gnu/libc.so.6", 0x1095fc));
  return t;
}

struct SyntheticJob {
  std::vector<ThreadStack> normal;  // the threads of a rank waiting in the collective
  ThreadStack busy_worker;          // noise: a dataloader worker caught mid-batch
  ThreadStack culprit_main;         // the one rank that never reached the collective

  SyntheticJob() {
    const std::string libc = "/usr/lib/x86_64-linux-gnu/libc.so.6";
    const std::string simnccl = "/opt/hangwatch/lib/libsimnccl.so";
    normal.push_back(makeThread("MainThread",
                                {native("__futex_abstimed_wait_common", libc, 0x85e16),
                                 native("cudaStreamSynchronize", "/opt/hangwatch/lib/libsimcuda.so", 0x170bc),
                                 python("item", "/workspace/train/shim.py", 41), python("step", "/workspace/train/train.py", 123)},
                                true));
    for (int c = 0; c < 4; ++c)
      normal.push_back(makeThread("simnccl-ch" + std::to_string(c),
                                  {native("syscall", libc, 0x10a7f9), native("simnccl_wait_peer", simnccl, 0x31c02)}, false));
    for (int k = normal.size(); k < kThreads; ++k)
      normal.push_back(makeThread("helper-" + std::to_string(k),
                                  {native("__futex_abstimed_wait_common", libc, 0x85e16),
                                   native("pthread_cond_wait", libc, 0x88558),
                                   native("helper_loop_" + std::to_string(k), "/opt/torch/lib/libtorch_cpu.so", 0x100 * k)},
                                  k % 3 == 0));
    busy_worker = makeThread(normal.back().name,
                             {native("__memmove_avx_unaligned_erms", libc, 0x1a1c40),
                              python("decode", "/workspace/train/data.py", 61)},
                             true);
    culprit_main = makeThread("MainThread",
                              {native("clock_nanosleep", libc, 0xd2e95),
                               python("wait_for_peer_file", "/workspace/train/train.py", 77)},
                              true);
  }

  // Rank r's threads, by reference to the few prototypes (16,384 copies would not fit).
  void forEachThread(int rank, auto&& f) const {
    for (size_t k = 0; k < normal.size(); ++k) {
      const ThreadStack* t = &normal[k];
      if (k == 0 && rank == kRanks / 3) t = &culprit_main;
      if (k + 1 == normal.size() && rank % 97 == 5) t = &busy_worker;
      f(*t);
    }
  }
};

const SyntheticJob& job() {
  static const SyntheticJob j;
  return j;
}

void BM_StackTreeAllRanks(benchmark::State& state) {
  const int ranks = static_cast<int>(state.range(0));
  size_t nodes = 0;
  for (auto _ : state) {
    StackTree tree;
    for (int r = 0; r < ranks; ++r) job().forEachThread(r, [&](const ThreadStack& t) { tree.addThread(r, t); });
    nodes = tree.nodes().size();
    benchmark::DoNotOptimize(tree.nodes().data());
  }
  state.counters["nodes"] = static_cast<double>(nodes);
  state.counters["frames/s"] =
      benchmark::Counter(static_cast<double>(ranks) * kThreads * kFrames, benchmark::Counter::kIsIterationInvariantRate);
}
BENCHMARK(BM_StackTreeAllRanks)->Arg(1024)->Arg(kRanks)->Unit(benchmark::kMillisecond);

void BM_StackTreeFoldedAndDot(benchmark::State& state) {
  StackTree tree;
  for (int r = 0; r < kRanks; ++r) job().forEachThread(r, [&](const ThreadStack& t) { tree.addThread(r, t); });
  for (auto _ : state) {
    benchmark::DoNotOptimize(tree.folded());
    benchmark::DoNotOptimize(tree.dot());
  }
}
BENCHMARK(BM_StackTreeFoldedAndDot)->Unit(benchmark::kMillisecond);

void BM_StackClassifierAllRanks(benchmark::State& state) {
  const int ranks = static_cast<int>(state.range(0));
  std::vector<ThreadStack> threads;
  size_t classes = 0;
  for (auto _ : state) {
    StackClassifier classifier;
    for (int r = 0; r < ranks; ++r) {
      // Copies of the prototypes would dominate; the classifier reads through references.
      state.PauseTiming();
      threads.clear();
      job().forEachThread(r, [&](const ThreadStack& t) { threads.push_back(t); });
      state.ResumeTiming();
      classifier.addRank(r, threads);
    }
    classes = classifier.classes().size();
  }
  state.counters["classes"] = static_cast<double>(classes);
}
BENCHMARK(BM_StackClassifierAllRanks)->Arg(1024)->Arg(kRanks)->Unit(benchmark::kMillisecond);

// One rank's forensics dump as the collector writes it (toJson(...).dump(1)).
std::string rankDumpText() {
  hangwatch::ForensicsDump d;
  d.rank = 7;
  d.pid = 4242;
  d.host = "node00000";
  job().forEachThread(7, [&](const ThreadStack& t) { d.threads.push_back(t); });
  for (int c = 0; c < 4; ++c) {
    hangwatch::RingProgress r;
    r.comm = "57a76bac89a0c4ad";
    r.op = "ncclAllReduce";
    r.seq = 1000;
    r.channel = c;
    r.rank = 7;
    r.prev = 6;
    r.next = 8;
    hangwatch::RingConnection conn;
    conn.peer = 6;
    conn.target_step = 96001;
    conn.observed_step = 96000;
    r.recv = conn;
    conn.peer = 8;
    r.send = conn;
    d.ring_progress.push_back(r);
  }
  return hangwatch::toJson(d).dump(1) + "\n";
}

// The floor any reader pays: touching every byte once.
void BM_DumpBytesScan(benchmark::State& state) {
  const std::string text = rankDumpText();
  for (auto _ : state) {
    size_t quotes = 0;
    for (const char* p = text.data(); (p = static_cast<const char*>(std::memchr(p, '"', text.data() + text.size() - p)));
         ++p)
      ++quotes;
    benchmark::DoNotOptimize(quotes);
  }
  state.SetBytesProcessed(static_cast<int64_t>(state.iterations() * text.size()));
}
BENCHMARK(BM_DumpBytesScan);

void BM_ForensicsDumpFromText(benchmark::State& state) {
  const std::string text = rankDumpText();
  for (auto _ : state) {
    auto d = hangwatch::forensicsDumpFromText(text);
    benchmark::DoNotOptimize(d.ok());
  }
  state.SetBytesProcessed(static_cast<int64_t>(state.iterations() * text.size()));
  state.counters["dump_bytes"] = static_cast<double>(text.size());
}
BENCHMARK(BM_ForensicsDumpFromText);

void BM_ForensicsDumpFromTextFast(benchmark::State& state) {
  const std::string text = rankDumpText();
  for (auto _ : state) {
    auto d = hangwatch::dumpio::forensicsDumpFromTextFast(text);
    benchmark::DoNotOptimize(d.ok());
  }
  state.SetBytesProcessed(static_cast<int64_t>(state.iterations() * text.size()));
}
BENCHMARK(BM_ForensicsDumpFromTextFast);

}  // namespace

BENCHMARK_MAIN();

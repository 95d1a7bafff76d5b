// What keeping the last collectives per communicator (IssuedHistory, comm_table.h) adds to
// each collective call's bookkeeping, against the seq the interposer took before it, and what
// counting a send or receive per peer (P2pCounts) costs: report the ratios, measured in the
// same run.
//   build/bench/issued_history_bench
#include <benchmark/benchmark.h>

#include "hangwatch/watchdog/comm_table.h"

namespace {

using hangwatch::watchdog::CommEntry;

// The baseline: a collective takes its seq on the communicator.
void BM_TakeSeq(benchmark::State& state) {
  CommEntry entry;
  for (auto _ : state) benchmark::DoNotOptimize(entry.issued.fetch_add(1, std::memory_order_acq_rel));
}
BENCHMARK(BM_TakeSeq);

// The same, and the call's arguments kept in its slot.
void BM_TakeSeqAndKeepTheCall(benchmark::State& state) {
  CommEntry entry;
  uint64_t count = 262144;
  for (auto _ : state) {
    const uint64_t seq = entry.issued.fetch_add(1, std::memory_order_acq_rel);
    entry.recent.note(seq, "ncclAllReduce", count++, 7, -1);
    benchmark::ClobberMemory();
  }
}
BENCHMARK(BM_TakeSeqAndKeepTheCall);

// What a snapshot pays to read one communicator's record (off the hot path).
void BM_ReadTheRecord(benchmark::State& state) {
  CommEntry entry;
  for (uint64_t s = 0; s < 40; ++s) entry.recent.note(entry.issued.fetch_add(1), "ncclAllReduce", s, 7, -1);
  for (auto _ : state) benchmark::DoNotOptimize(entry.recent.read(entry.issued.load()));
}
BENCHMARK(BM_ReadTheRecord);

// A transfer counted against its peer (P2pCounts): a pipeline stage talks to two neighbours, so
// the second slot is the one found; against BM_TakeSeq, what a send or receive's bookkeeping adds.
void BM_CountATransfer(benchmark::State& state) {
  CommEntry entry;
  entry.p2p.note(0, true);
  entry.p2p.note(2, false);
  for (auto _ : state) {
    entry.p2p.note(2, true);
    benchmark::ClobberMemory();
  }
}
BENCHMARK(BM_CountATransfer);

}  // namespace

BENCHMARK_MAIN();

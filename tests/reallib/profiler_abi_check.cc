// The profiler plugin ABI as hangwatch and simnccl declare it (common/nccl_profiler_v5.h,
// nccl_profiler_v4.h) against the real libnccl.so.2's DWARF: every field offset, struct
// size, event type and state value is asked of gdb in one batch run and compared.
//   profiler_abi_check /usr/local/cuda/lib64/libnccl.so.2
#include <cstddef>
#include <cstdio>
#include <map>
#include <string>
#include <vector>

#include "hangwatch/common/nccl_profiler_v4.h"
#include "hangwatch/common/nccl_profiler_v5.h"

namespace np = hangwatch::nccl_profiler;

namespace {

struct Expectation {
  std::string expr;  // a gdb expression over NCCL's types
  long value;        // what hangwatch's declarations say
};

#define FIELD(ours, theirs, path) \
  Expectation{"(long)&((" theirs "*)0)->" #path, static_cast<long>(offsetof(ours, path))}
#define SIZE(ours, theirs) Expectation{"(long)sizeof(" theirs ")", static_cast<long>(sizeof(ours))}
#define VALUE(ours, theirs) Expectation{"(long)" theirs, static_cast<long>(ours)}

// The v5 event descriptor, field by field.
std::vector<Expectation> v5Descriptor() {
  return {
      SIZE(np::EventDescr, "ncclProfilerEventDescr_v5_t"),
      FIELD(np::EventDescr, "ncclProfilerEventDescr_v5_t", parentObj),
      FIELD(np::EventDescr, "ncclProfilerEventDescr_v5_t", rank),
      FIELD(np::EventDescr, "ncclProfilerEventDescr_v5_t", groupApi.graphCaptured),
      FIELD(np::EventDescr, "ncclProfilerEventDescr_v5_t", groupApi.groupDepth),
      FIELD(np::EventDescr, "ncclProfilerEventDescr_v5_t", collApi.func),
      FIELD(np::EventDescr, "ncclProfilerEventDescr_v5_t", collApi.count),
      FIELD(np::EventDescr, "ncclProfilerEventDescr_v5_t", collApi.datatype),
      FIELD(np::EventDescr, "ncclProfilerEventDescr_v5_t", collApi.root),
      FIELD(np::EventDescr, "ncclProfilerEventDescr_v5_t", collApi.stream),
      FIELD(np::EventDescr, "ncclProfilerEventDescr_v5_t", collApi.graphCaptured),
      FIELD(np::EventDescr, "ncclProfilerEventDescr_v5_t", p2pApi.func),
      FIELD(np::EventDescr, "ncclProfilerEventDescr_v5_t", p2pApi.count),
      FIELD(np::EventDescr, "ncclProfilerEventDescr_v5_t", p2pApi.datatype),
      FIELD(np::EventDescr, "ncclProfilerEventDescr_v5_t", p2pApi.stream),
      FIELD(np::EventDescr, "ncclProfilerEventDescr_v5_t", p2pApi.graphCaptured),
      FIELD(np::EventDescr, "ncclProfilerEventDescr_v5_t", kernelLaunch.stream),
      FIELD(np::EventDescr, "ncclProfilerEventDescr_v5_t", coll.seqNumber),
      FIELD(np::EventDescr, "ncclProfilerEventDescr_v5_t", coll.func),
      FIELD(np::EventDescr, "ncclProfilerEventDescr_v5_t", coll.sendBuff),
      FIELD(np::EventDescr, "ncclProfilerEventDescr_v5_t", coll.recvBuff),
      FIELD(np::EventDescr, "ncclProfilerEventDescr_v5_t", coll.count),
      FIELD(np::EventDescr, "ncclProfilerEventDescr_v5_t", coll.root),
      FIELD(np::EventDescr, "ncclProfilerEventDescr_v5_t", coll.datatype),
      FIELD(np::EventDescr, "ncclProfilerEventDescr_v5_t", coll.nChannels),
      FIELD(np::EventDescr, "ncclProfilerEventDescr_v5_t", coll.nWarps),
      FIELD(np::EventDescr, "ncclProfilerEventDescr_v5_t", coll.algo),
      FIELD(np::EventDescr, "ncclProfilerEventDescr_v5_t", coll.proto),
      FIELD(np::EventDescr, "ncclProfilerEventDescr_v5_t", coll.parentGroup),
      FIELD(np::EventDescr, "ncclProfilerEventDescr_v5_t", p2p.func),
      FIELD(np::EventDescr, "ncclProfilerEventDescr_v5_t", p2p.buff),
      FIELD(np::EventDescr, "ncclProfilerEventDescr_v5_t", p2p.datatype),
      FIELD(np::EventDescr, "ncclProfilerEventDescr_v5_t", p2p.count),
      FIELD(np::EventDescr, "ncclProfilerEventDescr_v5_t", p2p.peer),
      FIELD(np::EventDescr, "ncclProfilerEventDescr_v5_t", p2p.nChannels),
      FIELD(np::EventDescr, "ncclProfilerEventDescr_v5_t", p2p.parentGroup),
      FIELD(np::EventDescr, "ncclProfilerEventDescr_v5_t", proxyOp.pid),
      FIELD(np::EventDescr, "ncclProfilerEventDescr_v5_t", proxyOp.channelId),
      FIELD(np::EventDescr, "ncclProfilerEventDescr_v5_t", proxyOp.peer),
      FIELD(np::EventDescr, "ncclProfilerEventDescr_v5_t", proxyOp.nSteps),
      FIELD(np::EventDescr, "ncclProfilerEventDescr_v5_t", proxyOp.chunkSize),
      FIELD(np::EventDescr, "ncclProfilerEventDescr_v5_t", proxyOp.isSend),
      FIELD(np::EventDescr, "ncclProfilerEventDescr_v5_t", proxyStep.step),
      FIELD(np::EventDescr, "ncclProfilerEventDescr_v5_t", kernelCh.channelId),
      FIELD(np::EventDescr, "ncclProfilerEventDescr_v5_t", kernelCh.pTimer),
      FIELD(np::EventDescr, "ncclProfilerEventDescr_v5_t", netPlugin.id),
      FIELD(np::EventDescr, "ncclProfilerEventDescr_v5_t", netPlugin.data),
  };
}

// The v4 descriptor, the plugin tables of both versions and the state arguments.
std::vector<Expectation> v4DescriptorAndTables() {
  return {
      SIZE(np::EventDescrV4, "ncclProfilerEventDescr_v4_t"),
      FIELD(np::EventDescrV4, "ncclProfilerEventDescr_v4_t", parentObj),
      FIELD(np::EventDescrV4, "ncclProfilerEventDescr_v4_t", rank),
      FIELD(np::EventDescrV4, "ncclProfilerEventDescr_v4_t", coll.seqNumber),
      FIELD(np::EventDescrV4, "ncclProfilerEventDescr_v4_t", coll.datatype),
      FIELD(np::EventDescrV4, "ncclProfilerEventDescr_v4_t", coll.nChannels),
      FIELD(np::EventDescrV4, "ncclProfilerEventDescr_v4_t", coll.nWarps),
      FIELD(np::EventDescrV4, "ncclProfilerEventDescr_v4_t", coll.proto),
      FIELD(np::EventDescrV4, "ncclProfilerEventDescr_v4_t", p2p.peer),
      FIELD(np::EventDescrV4, "ncclProfilerEventDescr_v4_t", p2p.nChannels),
      FIELD(np::EventDescrV4, "ncclProfilerEventDescr_v4_t", proxyOp.channelId),
      FIELD(np::EventDescrV4, "ncclProfilerEventDescr_v4_t", proxyOp.isSend),
      FIELD(np::EventDescrV4, "ncclProfilerEventDescr_v4_t", proxyStep.step),
      FIELD(np::EventDescrV4, "ncclProfilerEventDescr_v4_t", kernelCh.pTimer),
      FIELD(np::EventDescrV4, "ncclProfilerEventDescr_v4_t", netPlugin.data),
      SIZE(np::EventStateArgs, "ncclProfilerEventStateArgs_v5_t"),
      SIZE(np::EventStateArgs, "ncclProfilerEventStateArgs_v4_t"),
      SIZE(np::ProfilerV5, "ncclProfiler_v5_t"),
      FIELD(np::ProfilerV5, "ncclProfiler_v5_t", finalize),
      SIZE(np::ProfilerV4, "ncclProfiler_v4_t"),
      FIELD(np::ProfilerV4, "ncclProfiler_v4_t", finalize),
  };
}

// Event types and state values.
std::vector<Expectation> enumValues() {
  return {
      VALUE(np::kGroup, "ncclProfileGroup"),
      VALUE(np::kColl, "ncclProfileColl"),
      VALUE(np::kP2p, "ncclProfileP2p"),
      VALUE(np::kProxyOp, "ncclProfileProxyOp"),
      VALUE(np::kProxyStep, "ncclProfileProxyStep"),
      VALUE(np::kProxyCtrl, "ncclProfileProxyCtrl"),
      VALUE(np::kKernelCh, "ncclProfileKernelCh"),
      VALUE(np::kNetPlugin, "ncclProfileNetPlugin"),
      VALUE(np::kGroupApi, "ncclProfileGroupApi"),
      VALUE(np::kCollApi, "ncclProfileCollApi"),
      VALUE(np::kP2pApi, "ncclProfileP2pApi"),
      VALUE(np::kKernelLaunch, "ncclProfileKernelLaunch"),
      VALUE(np::kProxyStepSendGPUWait, "ncclProfilerProxyStepSendGPUWait"),
      VALUE(np::kProxyStepSendWait, "ncclProfilerProxyStepSendWait"),
      VALUE(np::kProxyStepRecvWait, "ncclProfilerProxyStepRecvWait"),
      VALUE(np::kProxyStepRecvFlushWait, "ncclProfilerProxyStepRecvFlushWait"),
      VALUE(np::kProxyStepRecvGPUWait, "ncclProfilerProxyStepRecvGPUWait"),
      VALUE(np::kProxyCtrlIdle, "ncclProfilerProxyCtrlIdle"),
      VALUE(np::kProxyCtrlAppendEnd, "ncclProfilerProxyCtrlAppendEnd"),
      VALUE(np::kProxyOpInProgress, "ncclProfilerProxyOpInProgress_v4"),
      VALUE(np::kProxyStepSendPeerWait, "ncclProfilerProxyStepSendPeerWait_v4"),
      VALUE(np::kNetPluginUpdate, "ncclProfilerNetPluginUpdate"),
      VALUE(np::kKernelChStop, "ncclProfilerKernelChStop"),
      VALUE(np::kGroupStartApiStop, "ncclProfilerGroupStartApiStop"),
      VALUE(np::kGroupEndApiStart, "ncclProfilerGroupEndApiStart"),
  };
}

std::vector<Expectation> expectations() {
  std::vector<Expectation> all = v5Descriptor();
  for (auto part : {v4DescriptorAndTables(), enumValues()})
    all.insert(all.end(), part.begin(), part.end());
  return all;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 2) {
    std::fprintf(stderr, "usage: %s LIBNCCL\n", argv[0]);
    return 2;
  }
  const std::vector<Expectation> want = expectations();
  std::string cmd = "gdb -nx -batch";
  for (size_t i = 0; i < want.size(); ++i)
    cmd += " -ex 'printf \"I%d=%ld\\n\", " + std::to_string(i) + ", " + want[i].expr + "'";
  cmd += " '" + std::string(argv[1]) + "' 2>&1";
  FILE* gdb = popen(cmd.c_str(), "r");
  if (gdb == nullptr) return 2;
  std::map<size_t, long> got;
  char line[4096];
  while (std::fgets(line, sizeof(line), gdb) != nullptr) {
    size_t n = 0;
    long v = 0;
    if (std::sscanf(line, "I%zu=%ld", &n, &v) == 2) got[n] = v;
  }
  pclose(gdb);
  int bad = 0;
  for (size_t i = 0; i < want.size(); ++i) {
    auto it = got.find(i);
    if (it == got.end() || it->second != want[i].value) {
      std::printf("MISMATCH %s: hangwatch %ld, libnccl %s\n", want[i].expr.c_str(), want[i].value,
                  it == got.end() ? "(no answer)" : std::to_string(it->second).c_str());
      ++bad;
    }
  }
  std::printf("%zu checked, %d mismatched\n", want.size(), bad);
  return bad == 0 ? 0 : 1;
}

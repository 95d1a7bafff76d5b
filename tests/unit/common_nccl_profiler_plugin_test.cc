// How NCCL 2.28 finds its profiler plugin and which interface it takes
// (common/nccl_profiler_plugin.h), checked against NCCL's source: src/plugin/plugin_open.cc
// (names), src/plugin/profiler.cc (NET library fallback, v5 then v4), src/plugin/net.cc
// (which NET library), src/plugin/profiler/profiler_v4.cc (the v4 adaptor).
#include <dlfcn.h>

#include <catch2/catch.hpp>
#include <cstdlib>
#include <map>
#include <string>
#include <vector>

#include "hangwatch/common/nccl_profiler_plugin.h"
#include "test_env.h"

namespace np = hangwatch::nccl_profiler;

using test_support::envOf;

namespace {

std::vector<std::string> names(const std::vector<np::LibraryCandidate>& cs) {
  std::vector<std::string> out;
  for (const auto& c : cs) out.push_back(c.program ? "<program>" : c.name);
  return out;
}

}  // namespace

TEST_CASE("PluginNamesAreTriedAsNcclsOpenPluginLibTriesThem") {
  using V = std::vector<std::string>;
  CHECK(names(np::pluginLibraryCandidates("libnccl-profiler", nullptr)) == V{"libnccl-profiler.so"});
  CHECK(names(np::pluginLibraryCandidates("libnccl-profiler", "")) == V{"libnccl-profiler.so"});
  // A bare name is tried as given, then with NCCL's prefix.
  CHECK(names(np::pluginLibraryCandidates("libnccl-profiler", "census")) ==
        V{"census", "libnccl-profiler-census.so"});
  // Paths and lib*.so names are tried only as given.
  CHECK(names(np::pluginLibraryCandidates("libnccl-profiler", "/opt/p/libx.so")) == V{"/opt/p/libx.so"});
  CHECK(names(np::pluginLibraryCandidates("libnccl-profiler", "libx.so")) == V{"libx.so"});
  CHECK(names(np::pluginLibraryCandidates("libnccl-profiler", "libx.so.1")) == V{"libx.so.1", "libnccl-profiler-libx.so.1.so"});
  CHECK(names(np::pluginLibraryCandidates("libnccl-net", "census")) == V{"census", "libnccl-net-census.so"});
}

TEST_CASE("StaticPluginOrAnyPrefixOfItIsTheProgramsOwnScope") {
  // tryOpenLib: strncasecmp(name, "STATIC_PLUGIN", strlen(name)) == 0 opens dlopen(NULL).
  for (const char* name : {"STATIC_PLUGIN", "static_plugin", "Static", "s"}) {
    INFO(name);
    auto cs = np::pluginLibraryCandidates("libnccl-profiler", name);
    REQUIRE(!cs.empty());
    CHECK(cs[0].program);
  }
  for (const char* name : {"STATIC_PLUGINS", "plugin", "x"}) {
    INFO(name);
    CHECK(!np::pluginLibraryCandidates("libnccl-profiler", name)[0].program);
  }
  np::PluginLibrary program = np::openPluginLibrary("libnccl-profiler", "STATIC_PLUGIN", 0);
  CHECK(program.handle != nullptr);
  CHECK(program.opened.empty());
}

TEST_CASE("WithoutAProfilerLibraryTheNetPluginsLibraryIsTaken") {
  const auto net = envOf({{"NCCL_NET_PLUGIN", CENSUS_NET_PLUGIN_LIBRARY}});
  np::PluginLibrary lib = np::openProfilerLibrary("/nonexistent/libnccl-profiler-x.so", net, 0);
  REQUIRE(lib);
  CHECK(lib.opened == CENSUS_NET_PLUGIN_LIBRARY);
  CHECK(np::profilerInterface([&](const char* s) { return dlsym(lib.handle, s); }).version == 5);
  SECTION("a list: the first that loads and has an ncclNet") {
    const auto list = envOf({{"NCCL_NET_PLUGIN", std::string("/nonexistent/a.so,") + CENSUS_PROFILER_LIBRARY + "," +
                                                     CENSUS_NET_PLUGIN_LIBRARY}});
    CHECK(np::openNetPluginLibrary(list, 0).opened == CENSUS_NET_PLUGIN_LIBRARY);
  }
  SECTION("none: no NET plugin library at all") {
    CHECK(!np::openProfilerLibrary("/nonexistent/p.so", envOf({{"NCCL_NET_PLUGIN", "none"}}), 0));
  }
  SECTION("a library without an ncclNet is no NET plugin") {
    CHECK(!np::openNetPluginLibrary(envOf({{"NCCL_NET_PLUGIN", CENSUS_PROFILER_LIBRARY}}), 0));
  }
}

TEST_CASE("WithRtldNoloadOnlyANetPluginAlreadyLoadedIsTaken") {
  // The chain looks for the one NCCL loaded itself (ncclGetNetPluginLib).
  const auto net = envOf({{"NCCL_NET_PLUGIN", "census"}});  // libnccl-net-census.so, by the bare-name rule
  CHECK(!np::openNetPluginLibrary(net, RTLD_NOLOAD));
  REQUIRE(dlopen(CENSUS_NET_PLUGIN_LIBRARY, RTLD_NOW | RTLD_LOCAL) != nullptr);
  CHECK(np::openNetPluginLibrary(net, RTLD_NOLOAD).opened == "libnccl-net-census.so");
}

TEST_CASE("V5IsTakenBeforeV4AndV4ThroughNcclsAdaptor") {
  void* both = dlopen(CENSUS_PROFILER_LIBRARY, RTLD_NOW | RTLD_LOCAL);
  void* v4_only = dlopen(CENSUS_PROFILER_V4_LIBRARY, RTLD_NOW | RTLD_LOCAL);
  REQUIRE(both != nullptr);
  REQUIRE(v4_only != nullptr);
  np::ProfilerInterface a = np::profilerInterface([&](const char* s) { return dlsym(both, s); });
  CHECK(a.version == 5);
  CHECK(a.table == dlsym(both, "ncclProfiler_v5"));
  np::ProfilerInterface b = np::profilerInterface([&](const char* s) { return dlsym(v4_only, s); });
  CHECK(b.version == 4);
  CHECK(std::string(b.table->name) == "census-v4");
  CHECK(np::profilerInterface([](const char*) { return nullptr; }).table == nullptr);
}

namespace {

struct V4Calls {
  int inits = 0;
  uint64_t comm = 0;
  int starts = 0;
  np::EventDescrV4 last{};
  std::vector<int> states;
};
V4Calls g_v4;
int g_handle;

ncclResult_t v4Init(void** ctx, int* mask, const char*, uint64_t comm, int, int, int, np::DebugLogger) {
  ++g_v4.inits;
  g_v4.comm = comm;
  *mask = 7;
  *ctx = &g_v4;
  return ncclSuccess;
}
ncclResult_t v4Start(void*, void** h, np::EventDescrV4* d) {
  ++g_v4.starts;
  g_v4.last = *d;
  *h = &g_handle;
  return ncclSuccess;
}
ncclResult_t v4Stop(void*) { return ncclSuccess; }
ncclResult_t v4Record(void*, np::EventState s, np::EventStateArgs*) {
  g_v4.states.push_back(s);
  return ncclSuccess;
}
ncclResult_t v4Finalize(void*) { return ncclSuccess; }
const np::ProfilerV4 kV4 = {"v4", &v4Init, &v4Start, &v4Stop, &v4Record, &v4Finalize};

}  // namespace

TEST_CASE("TheV4AdaptorConvertsAsNcclsProfilerV4Does") {
  const np::ProfilerV5* p = np::adaptV4(&kV4);
  void* ctx = nullptr;
  int mask = 0;
  REQUIRE(p->init(&ctx, 0x1234, &mask, "n", 1, 2, 0, nullptr) == ncclSuccess);
  CHECK(g_v4.comm == 0x1234);
  CHECK(mask == 7);
  int group = 0, coll_api = 0;
  np::EventDescr coll{};
  coll.type = np::kColl;
  coll.parentObj = &coll_api;
  coll.rank = 3;
  coll.coll.seqNumber = 9;
  coll.coll.func = "AllReduce";
  coll.coll.nChannels = 2;
  coll.coll.proto = "SIMPLE";
  coll.coll.parentGroup = &group;
  void* h = nullptr;
  p->startEvent(ctx, &h, &coll);
  CHECK(h == &g_handle);
  CHECK(g_v4.last.type == np::kColl);
  CHECK(g_v4.last.parentObj == &group);  // v4's Coll parent is the Group
  CHECK(g_v4.last.rank == 3);
  CHECK(g_v4.last.coll.seqNumber == 9);
  CHECK(g_v4.last.coll.nChannels == 2);
  CHECK(std::string(g_v4.last.coll.proto) == "SIMPLE");
  // API events never reach a v4 plugin, and NCCL's handle is left as it was.
  for (uint64_t type : {np::kGroupApi, np::kCollApi, np::kP2pApi, np::kKernelLaunch}) {
    np::EventDescr api{};
    api.type = type;
    void* kept = &group;
    p->startEvent(ctx, &kept, &api);
    CHECK(kept == &group);
  }
  CHECK(g_v4.starts == 1);
  np::EventStateArgs args{};
  args.proxyStep.transSize = 10;
  p->recordEventState(h, np::kProxyStepSendWait, &args);
  p->recordEventState(h, np::kGroupStartApiStop, nullptr);
  p->recordEventState(h, np::kKernelChStop, &args);
  CHECK(g_v4.states == std::vector<int>{np::kProxyStepSendWait, np::kKernelChStop});
}

TEST_CASE("ImpliedParentsFollowNccls228Masks") {
  // src/plugin/profiler.cc: groupApiMask, collApiMask, p2pApiMask; the Group, task,
  // ProxyOp, ProxyStep and KernelCh conditions; ProxyCtrl and KernelLaunch only themselves.
  CHECK(np::emittingMask(np::kGroupApi) == 0xfdf);  // all but ProxyCtrl
  CHECK(np::emittingMask(np::kCollApi) == (np::kCollApi | np::kColl | np::kProxyOp | np::kProxyStep | np::kKernelCh | np::kNetPlugin));
  CHECK(np::emittingMask(np::kP2pApi) == (np::kP2pApi | np::kP2p | np::kProxyOp | np::kProxyStep | np::kKernelCh | np::kNetPlugin));
  CHECK(np::emittingMask(np::kGroup) == (np::kGroup | np::kColl | np::kP2p | np::kProxyOp | np::kProxyStep | np::kKernelCh | np::kNetPlugin));
  CHECK(np::emittingMask(np::kColl) == (np::kColl | np::kProxyOp | np::kProxyStep | np::kKernelCh | np::kNetPlugin));
  CHECK(np::emittingMask(np::kP2p) == (np::kP2p | np::kProxyOp | np::kProxyStep | np::kKernelCh | np::kNetPlugin));
  CHECK(np::emittingMask(np::kProxyOp) == (np::kProxyOp | np::kProxyStep | np::kNetPlugin));
  CHECK(np::emittingMask(np::kProxyStep) == (np::kProxyStep | np::kNetPlugin));
  CHECK(np::emittingMask(np::kKernelCh) == np::kKernelCh);
  CHECK(np::emittingMask(np::kKernelLaunch) == np::kKernelLaunch);
  CHECK(np::emittingMask(np::kProxyCtrl) == np::kProxyCtrl);
  CHECK(np::emittingMask(np::kNetPlugin) == np::kNetPlugin);
}

#include "hangwatch/common/watchdog_snapshot.h"

#include <stdexcept>

#include <fmt/format.h>

#include "hangwatch/common/schema/json_codec.h"

namespace hangwatch {
namespace {

constexpr std::array<const char*, kSnapshotProxyStages> kSendStages = {"posted", "filled", "sent", "done"};
constexpr std::array<const char*, kSnapshotProxyStages> kRecvStages = {"posted", "arrived", "delivered", "done"};

// {"<stage name>": value, ...}: each known stage name of either direction; null is none.
template <typename F>
void readStages(const nlohmann::json& v, const char* what, F&& each) {
  if (v.is_null()) return;
  if (!v.is_object()) throw std::runtime_error(fmt::format("{} is not a JSON object", what));
  for (const auto& [name, value] : v.items())
    if (int stage = proxyStageIndex(name); stage >= 0 && !value.is_null()) each(stage, value);
}

}  // namespace

const std::array<const char*, kSnapshotProxyStages>& proxyStageNames(const std::string& dir) {
  return dir == "send" ? kSendStages : kRecvStages;
}

int proxyStageIndex(std::string_view name) {
  for (int i = 0; i < kSnapshotProxyStages; ++i)
    if (name == kSendStages[i] || name == kRecvStages[i]) return i;
  return -1;
}

namespace schema {

void ProxyStepsCodec::write(nlohmann::json& out, const SnapshotProxyConnection& c) {
  out = nlohmann::json::object();
  const auto& names = proxyStageNames(c.dir);
  for (int i = 0; i < kSnapshotProxyStages; ++i) out[names[i]] = c.steps[i];
}

void ProxyStepsCodec::read(const nlohmann::json& v, SnapshotProxyConnection& c, const char* what) {
  readStages(v, what, [&](int i, const nlohmann::json& x) {
    detail::readValue(x, c.steps[i], what);
  });
}

void ProxyMovedCodec::write(nlohmann::json& out, const SnapshotProxyConnection& c) {
  out = nlohmann::json::object();
  const auto& names = proxyStageNames(c.dir);
  for (int i = 0; i < kSnapshotProxyStages; ++i)
    out[names[i]] = c.moved_s_ago[i] ? nlohmann::json(*c.moved_s_ago[i]) : nlohmann::json(nullptr);
}

void ProxyMovedCodec::read(const nlohmann::json& v, SnapshotProxyConnection& c, const char* what) {
  readStages(v, what, [&](int i, const nlohmann::json& x) {
    detail::readValue(x, c.moved_s_ago[i], what);
  });
}

}  // namespace schema

nlohmann::json toJson(const WatchdogSnapshot& s) { return schema::toJson(s); }

Expected<WatchdogSnapshot> watchdogSnapshotFromJson(const nlohmann::json& j) {
  return schema::fromJson<WatchdogSnapshot>(j);
}

}  // namespace hangwatch

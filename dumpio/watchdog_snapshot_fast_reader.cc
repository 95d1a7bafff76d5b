#include "hangwatch/dumpio/watchdog_snapshot_fast_reader.h"

#include <simdjson.h>

#include <string>

#include "hangwatch/dumpio/forensics_dump_fast_reader.h"
#include "hangwatch/dumpio/record_reader.h"

namespace hangwatch::dumpio {
namespace {

namespace od = simdjson::ondemand;

constexpr std::string_view kIdentity = schema::keyOf(&WatchdogSnapshot::identity);

// {"<stage name>": value, ...}: each known stage name of either direction; null is none.
template <typename F>
bool readStages(RecordReader& r, od::value v, const char* what, F&& each) {
  od::json_type type;
  bool null;
  if (!r.kind(v, type, null, what)) return false;
  if (null) return true;
  return r.object(v, what, [&](std::string_view k, od::value m) {
    const int stage = proxyStageIndex(k);
    return stage < 0 ? true : each(stage, m);
  });
}

}  // namespace

template <>
struct OnDemandCustom<schema::ProxyStepsCodec> {
  static bool read(RecordReader& r, od::value v, SnapshotProxyConnection& c) {
    return readStages(r, v, "steps", [&](int i, od::value x) { return r.value(x, c.steps[i], "steps"); });
  }
};

template <>
struct OnDemandCustom<schema::ProxyMovedCodec> {
  static bool read(RecordReader& r, od::value v, SnapshotProxyConnection& c) {
    return readStages(r, v, "moved_s_ago", [&](int i, od::value x) { return r.value(x, c.moved_s_ago[i], "moved_s_ago"); });
  }
};

namespace {

Error snapshotError(const std::string& why) { return Error{"watchdog snapshot: " + why}; }

}  // namespace

Expected<WatchdogSnapshot> watchdogSnapshotFromPaddedText(std::string_view text, SnapshotReadOptions options) {
  thread_local od::parser parser;
  od::document doc;
  od::object o;
  if (std::optional<std::string> e = openObject(parser, doc, text, o)) return snapshotError(*e);
  RecordReader fields;
  WatchdogSnapshot s;
  bool had_identity = false;
  // Each occurrence of the identity starts from defaults, as the common reader's last-one-wins does.
  const bool ok = fields.record(o, s, "watchdog snapshot", [&](std::string_view k, od::value m) -> std::optional<bool> {
    if (!RecordReader::is(k, kIdentity)) return std::nullopt;
    std::optional<SnapshotIdentity> identity;
    if (!fields.optionalRecord(m, identity, "identity")) return false;
    had_identity = identity.has_value();
    s.identity = identity.value_or(SnapshotIdentity{});
    return true;
  });
  if (!ok) return snapshotError(fields.error());
  if (!endsAfter(doc)) return snapshotError("text after the snapshot");
  if (options.require_identity && !had_identity) return snapshotError("no identity object");
  return s;
}

Expected<WatchdogSnapshot> watchdogSnapshotFromTextFast(std::string_view text, SnapshotReadOptions options) {
  thread_local std::string padded;
  padded.assign(text.data(), text.size());
  padded.resize(text.size() + kFastReaderPadding);
  return watchdogSnapshotFromPaddedText(std::string_view(padded.data(), text.size()), options);
}

}  // namespace hangwatch::dumpio

#include "hangwatch/common/timeline_window.h"

#include <algorithm>
#include <cstdio>
#include <exception>
#include <fstream>
#include <map>
#include <sstream>
#include <stdexcept>

#include "hangwatch/common/json_fields.h"

namespace hangwatch {
namespace {

using nlohmann::json;
using json_fields::arrayOrEmpty;
using json_fields::checkedGet;
using json_fields::getOr;

// base + offset from a file: an offset that would overflow is a damaged file.
int64_t rebase(int64_t base, const json& offset) {
  int64_t out = 0;
  if (__builtin_add_overflow(base, checkedGet<int64_t>(offset, "time offset"), &out))
    throw std::out_of_range("time offset out of range");
  return out;
}

// Interns strings into a JSON table so each op stores a small index.
class StringTable {
 public:
  int indexOf(const std::string& s) {
    auto [it, added] = index_.emplace(s, static_cast<int>(strings_.size()));
    if (added) strings_.push_back(s);
    return it->second;
  }
  json toJson() const { return strings_; }

 private:
  std::map<std::string, int> index_;
  std::vector<std::string> strings_;
};

const std::string& tableAt(const std::vector<std::string>& table, const json& index, const char* what) {
  int64_t i = checkedGet<int64_t>(index, what);
  if (i < 0 || i >= static_cast<int64_t>(table.size())) throw std::runtime_error(std::string("bad ") + what + " index");
  return table[static_cast<size_t>(i)];
}

// The rows' keys and an op row's columns, for the writer and the reader alike.
constexpr const char* kBase = "base";
constexpr const char* kNames = "names";
constexpr const char* kStreams = "streams";
constexpr const char* kComms = "comms";
constexpr const char* kOps = "ops";
constexpr const char* kSyncs = "syncs";
enum OpColumn : size_t {
  kCls, kName, kStream, kComm, kCommRank, kCommSize, kPeer, kSeq, kBytes, kFlops, kIssue, kStart, kEnd,
  kShape,  // added later: a 13-column row has no shape
  kColumns
};
enum SyncColumn : size_t { kSyncName, kSyncStart, kSyncEnd, kSyncColumns };

json opRow(const TimelineOp& o, int64_t base, StringTable& names, StringTable& streams, StringTable& comms) {
  json row = json::array();
  row.get_ref<json::array_t&>().resize(kColumns);
  row[kCls] = o.cls;
  row[kName] = names.indexOf(o.name);
  row[kStream] = streams.indexOf(o.stream);
  row[kComm] = o.comm.empty() ? -1 : comms.indexOf(o.comm);
  row[kCommRank] = o.comm_rank;
  row[kCommSize] = o.comm_size;
  row[kPeer] = o.peer;
  row[kSeq] = o.seq;
  row[kBytes] = o.bytes;
  row[kFlops] = o.flops;
  row[kIssue] = o.issue_ns > 0 ? o.issue_ns - base : -1;
  row[kStart] = o.start_ns - base;
  row[kEnd] = o.end_ns - base;
  row[kShape] = o.shape.empty() ? -1 : names.indexOf(o.shape);
  return row;
}

TimelineOp opFromRow(const json& row, int64_t base, const std::vector<std::string>& names,
                     const std::vector<std::string>& streams, const std::vector<std::string>& comms) {
  if (!row.is_array() || row.size() < kShape) throw std::runtime_error("op is not a 13- or 14-field array");
  TimelineOp o;
  o.cls = row[kCls].get<std::string>();
  o.name = tableAt(names, row[kName], "name");
  o.stream = tableAt(streams, row[kStream], "stream");
  if (checkedGet<int64_t>(row[kComm], "comm") >= 0) o.comm = tableAt(comms, row[kComm], "comm");
  o.comm_rank = checkedGet<int>(row[kCommRank], "comm rank");
  o.comm_size = checkedGet<int>(row[kCommSize], "comm size");
  o.peer = checkedGet<int>(row[kPeer], "peer");
  o.seq = checkedGet<uint64_t>(row[kSeq], "seq");
  o.bytes = checkedGet<uint64_t>(row[kBytes], "bytes");
  o.flops = row[kFlops].get<double>();
  o.issue_ns = checkedGet<int64_t>(row[kIssue], "issue") >= 0 ? rebase(base, row[kIssue]) : 0;
  o.start_ns = rebase(base, row[kStart]);
  o.end_ns = rebase(base, row[kEnd]);
  if (row.size() > kShape && checkedGet<int64_t>(row[kShape], "shape") >= 0) o.shape = tableAt(names, row[kShape], "shape");
  return o;
}

}  // namespace

namespace timeline_codec {

void Rows::write(nlohmann::json& object, const TimelineWindow& w) {
  int64_t base = w.clock_mono_ns;
  for (const TimelineOp& o : w.ops) base = std::min(base, o.issue_ns > 0 ? o.issue_ns : o.start_ns);
  for (const TimelineSync& s : w.syncs) base = std::min(base, s.start_ns);
  StringTable names, streams, comms;
  json ops = json::array();
  for (const TimelineOp& o : w.ops) ops.push_back(opRow(o, base, names, streams, comms));
  json syncs = json::array();
  for (const TimelineSync& s : w.syncs) {
    json row = json::array();
    row.get_ref<json::array_t&>().resize(kSyncColumns);
    row[kSyncName] = names.indexOf(s.call);
    row[kSyncStart] = s.start_ns - base;
    row[kSyncEnd] = s.end_ns - base;
    syncs.push_back(std::move(row));
  }
  object[kBase] = base;
  object[kNames] = names.toJson();
  object[kStreams] = streams.toJson();
  object[kComms] = comms.toJson();
  object[kOps] = std::move(ops);
  object[kSyncs] = std::move(syncs);
}

void Rows::read(const nlohmann::json& object, TimelineWindow& w, const char*) {
  const int64_t base = getOr<int64_t>(object, kBase, 0);
  const auto names = arrayOrEmpty(object, kNames).get<std::vector<std::string>>();
  const auto streams = arrayOrEmpty(object, kStreams).get<std::vector<std::string>>();
  const auto comms = arrayOrEmpty(object, kComms).get<std::vector<std::string>>();
  w.ops.clear();
  for (const json& row : arrayOrEmpty(object, kOps)) w.ops.push_back(opFromRow(row, base, names, streams, comms));
  w.syncs.clear();
  for (const json& row : arrayOrEmpty(object, kSyncs)) {
    if (!row.is_array() || row.size() < kSyncColumns) throw std::runtime_error("sync is not a 3-field array");
    w.syncs.push_back({tableAt(names, row[kSyncName], "name"), rebase(base, row[kSyncStart]), rebase(base, row[kSyncEnd])});
  }
}

}  // namespace timeline_codec

nlohmann::json toJson(const TimelineWindow& w) { return schema::toJson(w); }

Expected<TimelineWindow> timelineWindowFromJson(const nlohmann::json& j) { return schema::fromJson<TimelineWindow>(j); }

Expected<TimelineWindow> readTimelineFile(const std::string& path) {
  std::ifstream in(path);
  if (!in) return Error{"cannot open " + path};
  std::stringstream text;
  text << in.rdbuf();
  json j = json::parse(text.str(), nullptr, /*allow_exceptions=*/false);
  if (j.is_discarded()) return Error{path + ": not JSON (truncated or corrupt)"};
  Expected<TimelineWindow> w = timelineWindowFromJson(j);
  if (!w) return Error{path + ": " + w.error()};
  return w;
}

double timelineUnixUs(const TimelineWindow& w, int64_t mono_ns) {
  return w.clock_unix_s * 1e6 + static_cast<double>(mono_ns - w.clock_mono_ns) / 1e3;
}

}  // namespace hangwatch

#include "hangwatch/common/timeline_window.h"

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

}  // namespace

nlohmann::json toJson(const TimelineWindow& w) {
  int64_t base = w.clock_mono_ns;
  for (const TimelineOp& o : w.ops) base = std::min(base, o.issue_ns > 0 ? o.issue_ns : o.start_ns);
  for (const TimelineSync& s : w.syncs) base = std::min(base, s.start_ns);
  StringTable names, streams, comms;
  json ops = json::array();
  for (const TimelineOp& o : w.ops) {
    json row = {o.cls, names.indexOf(o.name), streams.indexOf(o.stream), o.comm.empty() ? -1 : comms.indexOf(o.comm),
                o.comm_rank, o.comm_size, o.peer, o.seq, o.bytes, o.flops,
                o.issue_ns > 0 ? o.issue_ns - base : -1, o.start_ns - base, o.end_ns - base,
                o.shape.empty() ? -1 : names.indexOf(o.shape)};
    ops.push_back(std::move(row));
  }
  json syncs = json::array();
  for (const TimelineSync& s : w.syncs) syncs.push_back({names.indexOf(s.call), s.start_ns - base, s.end_ns - base});
  return {{"v", w.schema_version}, {"rank", w.rank}, {"host", w.host}, {"pid", w.pid},
          {"cm", w.clock_mono_ns}, {"cu", w.clock_unix_s}, {"lost", w.overwritten}, {"base", base},
          {"names", names.toJson()}, {"streams", streams.toJson()}, {"comms", comms.toJson()},
          {"ops", std::move(ops)}, {"syncs", std::move(syncs)}};
}

Expected<TimelineWindow> timelineWindowFromJson(const nlohmann::json& j) {
  try {
    if (!j.is_object()) throw std::runtime_error("not a JSON object");
    TimelineWindow w;
    w.schema_version = getOr(j, "v", 1);
    w.rank = getOr(j, "rank", -1);
    w.host = getOr<std::string>(j, "host", "");
    w.pid = getOr<int64_t>(j, "pid", 0);
    w.clock_mono_ns = getOr<int64_t>(j, "cm", 0);
    w.clock_unix_s = getOr(j, "cu", 0.0);
    w.overwritten = getOr<uint64_t>(j, "lost", 0);
    const int64_t base = getOr<int64_t>(j, "base", 0);
    const auto names = arrayOrEmpty(j, "names").get<std::vector<std::string>>();
    const auto streams = arrayOrEmpty(j, "streams").get<std::vector<std::string>>();
    const auto comms = arrayOrEmpty(j, "comms").get<std::vector<std::string>>();
    for (const json& row : arrayOrEmpty(j, "ops")) {
      if (!row.is_array() || row.size() < 13) throw std::runtime_error("op is not a 13- or 14-field array");
      TimelineOp o;
      o.cls = row[0].get<std::string>();
      o.name = tableAt(names, row[1], "name");
      o.stream = tableAt(streams, row[2], "stream");
      if (checkedGet<int64_t>(row[3], "comm") >= 0) o.comm = tableAt(comms, row[3], "comm");
      o.comm_rank = checkedGet<int>(row[4], "comm rank");
      o.comm_size = checkedGet<int>(row[5], "comm size");
      o.peer = checkedGet<int>(row[6], "peer");
      o.seq = checkedGet<uint64_t>(row[7], "seq");
      o.bytes = checkedGet<uint64_t>(row[8], "bytes");
      o.flops = row[9].get<double>();
      o.issue_ns = checkedGet<int64_t>(row[10], "issue") >= 0 ? rebase(base, row[10]) : 0;
      o.start_ns = rebase(base, row[11]);
      o.end_ns = rebase(base, row[12]);
      if (row.size() > 13 && checkedGet<int64_t>(row[13], "shape") >= 0) o.shape = tableAt(names, row[13], "shape");
      w.ops.push_back(std::move(o));
    }
    for (const json& row : arrayOrEmpty(j, "syncs")) {
      if (!row.is_array() || row.size() < 3) throw std::runtime_error("sync is not a 3-field array");
      w.syncs.push_back({tableAt(names, row[0], "name"), rebase(base, row[1]), rebase(base, row[2])});
    }
    return w;
  } catch (const std::exception& e) {
    return Error{std::string("timeline: ") + e.what()};
  }
}

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

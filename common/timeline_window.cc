#include "hangwatch/timeline_window.h"

#include <cstdio>
#include <exception>
#include <fstream>
#include <map>
#include <sstream>
#include <stdexcept>

#include "hangwatch/job_layout.h"
#include "hangwatch/json_fields.h"

namespace hangwatch {
namespace {

using nlohmann::json;
using json_fields::arrayOrEmpty;
using json_fields::getOr;

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
  int64_t i = index.get<int64_t>();
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
      if (row[3].get<int64_t>() >= 0) o.comm = tableAt(comms, row[3], "comm");
      o.comm_rank = row[4].get<int>();
      o.comm_size = row[5].get<int>();
      o.peer = row[6].get<int>();
      o.seq = row[7].get<uint64_t>();
      o.bytes = row[8].get<uint64_t>();
      o.flops = row[9].get<double>();
      int64_t issue = row[10].get<int64_t>();
      o.issue_ns = issue >= 0 ? base + issue : 0;
      o.start_ns = base + row[11].get<int64_t>();
      o.end_ns = base + row[12].get<int64_t>();
      if (row.size() > 13 && row[13].get<int64_t>() >= 0) o.shape = tableAt(names, row[13], "shape");
      w.ops.push_back(std::move(o));
    }
    for (const json& row : arrayOrEmpty(j, "syncs")) {
      if (!row.is_array() || row.size() < 3) throw std::runtime_error("sync is not a 3-field array");
      w.syncs.push_back({tableAt(names, row[0], "name"), base + row[1].get<int64_t>(), base + row[2].get<int64_t>()});
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

std::string timelinePath(const std::string& job_dir, int rank) {
  return job_dir + "/timeline/" + rankTag(rank) + ".json";
}

double timelineUnixUs(const TimelineWindow& w, int64_t mono_ns) {
  return w.clock_unix_s * 1e6 + static_cast<double>(mono_ns - w.clock_mono_ns) / 1e3;
}

}  // namespace hangwatch

#include "hangwatch/common/metrics_window.h"

#include <cmath>
#include <exception>
#include <fstream>
#include <stdexcept>

#include "hangwatch/common/json_fields.h"

namespace hangwatch {
namespace {

using nlohmann::json;
using json_fields::checkedGet;
using json_fields::getOptional;
using json_fields::getOr;
using json_fields::putOptional;



// Rates are estimates from ~9%-wide buckets and jittery timings; 4 significant digits
// keep them exact enough and the line short.
double fourDigits(double v) {
  if (v == 0 || !std::isfinite(v)) return std::isfinite(v) ? v : 0;
  double scale = std::pow(10.0, 3 - static_cast<int>(std::floor(std::log10(std::abs(v)))));
  return std::round(v * scale) / scale;
}

void putRate(json& j, const char* key, const std::optional<double>& v) {
  if (v) j[key] = fourDigits(*v);
}


LogHistogram histogramAt(const json& j, const char* key) {
  auto it = j.find(key);
  if (it == j.end()) return {};
  Expected<LogHistogram> h = LogHistogram::fromJson(*it);
  if (!h) throw std::runtime_error(std::string(key) + ": " + h.error());
  return *h;
}

const json* objectAt(const json& j, const char* key) {
  auto it = j.find(key);
  if (it == j.end() || it->is_null()) return nullptr;
  if (!it->is_object()) throw std::runtime_error(std::string(key) + " is not an object");
  return &*it;
}

const json* arrayAt(const json& j, const char* key) {
  auto it = j.find(key);
  if (it == j.end() || it->is_null()) return nullptr;
  if (!it->is_array()) throw std::runtime_error(std::string(key) + " is not an array");
  return &*it;
}

json opToJson(const OpWindowStats& o) {
  json j = {{"c", o.cls}, {"n", o.name}};
  if (!o.shape.empty()) j["sh"] = o.shape;
  if (!o.comm.empty()) {
    j["cm"] = o.comm;
    j["np"] = o.comm_size;
    putOptional(j, "cr", o.comm_rank);
  }
  putOptional(j, "peer", o.peer);
  if (o.bytes != 0) j["b"] = o.bytes;
  j["cnt"] = o.count;
  j["ns"] = o.total_ns;
  // Whole ns are precise enough for percentiles that are themselves within ~9%.
  j["p50"] = static_cast<int64_t>(o.p50_ns);
  j["p99"] = static_cast<int64_t>(o.p99_ns);
  j["max"] = o.max_ns;
  j["h"] = o.durations.toJson();
  putRate(j, "tf", o.tflops);
  putRate(j, "alg", o.algbw_gbps);
  putRate(j, "bus", o.busbw_gbps);
  return j;
}

OpWindowStats opFromJson(const json& j) {
  if (!j.is_object()) throw std::runtime_error("op is not an object");
  OpWindowStats o;
  o.cls = getOr<std::string>(j, "c", "");
  o.name = getOr<std::string>(j, "n", "");
  o.shape = getOr<std::string>(j, "sh", "");
  o.comm = getOr<std::string>(j, "cm", "");
  o.comm_size = getOr(j, "np", 0);
  o.comm_rank = getOptional<int>(j, "cr");
  o.peer = getOptional<int>(j, "peer");
  o.bytes = getOr<uint64_t>(j, "b", 0);
  o.count = getOr<uint64_t>(j, "cnt", 0);
  o.total_ns = getOr<int64_t>(j, "ns", 0);
  // Written as whole ns: read them as such, so a value no int64 holds is an error here,
  // not an out-of-range cast when the window is written again.
  o.p50_ns = static_cast<double>(getOr<int64_t>(j, "p50", 0));
  o.p99_ns = static_cast<double>(getOr<int64_t>(j, "p99", 0));
  o.max_ns = getOr<int64_t>(j, "max", 0);
  o.durations = histogramAt(j, "h");
  o.tflops = getOptional<double>(j, "tf");
  o.algbw_gbps = getOptional<double>(j, "alg");
  o.busbw_gbps = getOptional<double>(j, "bus");
  return o;
}

}  // namespace

nlohmann::json toJson(const MetricsWindow& w) {
  // Wall clock to the millisecond: it only places windows on a calendar; m0/m1 are exact.
  json j = {{"v", w.schema_version}, {"rank", w.rank}, {"host", w.host}, {"pid", w.pid},
            {"t0", std::round(w.start_unix_s * 1e3) / 1e3}, {"t1", std::round(w.end_unix_s * 1e3) / 1e3},
            {"m0", w.start_mono_ns}, {"m1", w.end_mono_ns}};
  json ops = json::array();
  for (const OpWindowStats& o : w.ops) ops.push_back(opToJson(o));
  j["ops"] = std::move(ops);
  j["oth"] = {{"cnt", w.other_count}, {"ns", w.other_ns}};
  json il = json::object();
  for (const auto& [cls, h] : w.issue_latency) il[cls] = h.toJson();
  j["il"] = std::move(il);
  j["busy"] = w.busy_ns;
  j["void"] = w.void_ns;
  j["vstep"] = w.inter_step_void_ns ? json(*w.inter_step_void_ns) : json(nullptr);
  json st = json::array();
  for (const StreamBusy& s : w.streams) st.push_back({{"s", s.stream}, {"busy", s.busy_ns}});
  j["st"] = std::move(st);
  json by = json::object();
  for (const HostSyncStats& s : w.syncs) by[s.call] = {s.count, s.total_ns};
  j["sync"] = {{"cnt", w.sync_count}, {"ns", w.sync_ns}, {"by", std::move(by)}};
  if (w.step) {
    j["step"] = {{"src", w.step->source}, {"cnt", w.step->count}, {"ns", w.step->total_ns},
                 {"p50", static_cast<int64_t>(w.step->p50_ns)}, {"max", w.step->max_ns}};
    if (!w.step->anchor.empty()) j["step"]["key"] = w.step->anchor;
  } else {
    j["step"] = nullptr;
  }
  j["drop"] = w.dropped;
  if (!w.links.empty()) {
    json lk = json::array();
    for (const LinkWindowStats& l : w.links)
      lk.push_back({{"nc", l.comm}, {"np", l.comm_size}, {"cr", l.comm_rank}, {"peer", l.peer}, {"b", l.bytes},
                    {"cnt", l.steps}, {"ns", l.busy_ns}});
    j["lk"] = std::move(lk);
  }
  return j;
}

Expected<MetricsWindow> metricsWindowFromJson(const nlohmann::json& j) {
  try {
    if (!j.is_object()) throw std::runtime_error("not a JSON object");
    MetricsWindow w;
    w.schema_version = getOr(j, "v", 1);
    w.rank = getOr(j, "rank", -1);
    w.host = getOr<std::string>(j, "host", "");
    w.pid = getOr<int64_t>(j, "pid", 0);
    w.start_unix_s = getOr(j, "t0", 0.0);
    w.end_unix_s = getOr(j, "t1", 0.0);
    w.start_mono_ns = getOr<int64_t>(j, "m0", 0);
    w.end_mono_ns = getOr<int64_t>(j, "m1", 0);
    if (const json* ops = arrayAt(j, "ops")) {
      for (const json& o : *ops) w.ops.push_back(opFromJson(o));
    }
    if (const json* oth = objectAt(j, "oth")) {
      w.other_count = getOr<uint64_t>(*oth, "cnt", 0);
      w.other_ns = getOr<int64_t>(*oth, "ns", 0);
    }
    if (const json* il = objectAt(j, "il")) {
      for (auto it = il->begin(); it != il->end(); ++it) w.issue_latency[it.key()] = histogramAt(*il, it.key().c_str());
    }
    w.busy_ns = getOr<int64_t>(j, "busy", 0);
    w.void_ns = getOr<int64_t>(j, "void", 0);
    w.inter_step_void_ns = getOptional<int64_t>(j, "vstep");
    if (const json* st = arrayAt(j, "st")) {
      for (const json& s : *st) {
        if (!s.is_object()) throw std::runtime_error("st entry is not an object");
        w.streams.push_back({getOr<std::string>(s, "s", ""), getOr<int64_t>(s, "busy", 0)});
      }
    }
    if (const json* sync = objectAt(j, "sync")) {
      w.sync_count = getOr<uint64_t>(*sync, "cnt", 0);
      w.sync_ns = getOr<int64_t>(*sync, "ns", 0);
      if (const json* by = objectAt(*sync, "by")) {
        for (auto it = by->begin(); it != by->end(); ++it) {
          if (!it->is_array() || it->size() != 2) throw std::runtime_error("sync.by entry is not [count, ns]");
          w.syncs.push_back({it.key(), checkedGet<uint64_t>((*it)[0], "sync.by count"),
                             checkedGet<int64_t>((*it)[1], "sync.by ns")});
        }
      }
    }
    if (const json* step = objectAt(j, "step")) {
      StepStats s;
      s.source = getOr<std::string>(*step, "src", "");
      s.anchor = getOr<std::string>(*step, "key", "");
      s.count = getOr<uint64_t>(*step, "cnt", 0);
      s.total_ns = getOr<int64_t>(*step, "ns", 0);
      s.p50_ns = static_cast<double>(getOr<int64_t>(*step, "p50", 0));
      s.max_ns = getOr<int64_t>(*step, "max", 0);
      w.step = s;
    }
    w.dropped = getOr<uint64_t>(j, "drop", 0);
    if (const json* lk = arrayAt(j, "lk")) {
      for (const json& l : *lk) {
        if (!l.is_object()) throw std::runtime_error("lk entry is not an object");
        w.links.push_back({getOr<std::string>(l, "nc", ""), getOr(l, "np", 0), getOr(l, "cr", 0), getOr(l, "peer", 0),
                           getOr<uint64_t>(l, "b", 0), getOr<uint64_t>(l, "cnt", 0), getOr<int64_t>(l, "ns", 0)});
      }
    }
    return w;
  } catch (const std::exception& e) {
    return Error{std::string("metrics window: ") + e.what()};
  }
}

Expected<MetricsWindow> metricsWindowFromLine(std::string_view line) {
  json j = json::parse(line.begin(), line.end(), nullptr, /*allow_exceptions=*/false);
  if (j.is_discarded()) return Error{"metrics window: not a JSON line"};
  return metricsWindowFromJson(j);
}

Expected<MetricsFile> readMetricsFile(const std::string& path) {
  std::ifstream in(path);
  if (!in) return Error{"cannot open " + path};
  MetricsFile f;
  std::string line;
  while (std::getline(in, line)) {
    if (line.find_first_not_of(" \t\r") == std::string::npos) continue;
    Expected<MetricsWindow> w = metricsWindowFromLine(line);
    if (w) {
      f.windows.push_back(std::move(*w));
    } else {
      ++f.bad_lines;
    }
  }
  return f;
}

LogHistogram issueLatencyAllClasses(const MetricsWindow& w) {
  LogHistogram all;
  for (const auto& [cls, h] : w.issue_latency) all.merge(h);
  return all;
}

}  // namespace hangwatch

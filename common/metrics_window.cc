#include "hangwatch/common/metrics_window.h"

#include <cmath>
#include <exception>
#include <fstream>
#include <stdexcept>

#include "hangwatch/common/json_fields.h"

namespace hangwatch {

namespace metrics_codec {

double fourDigits(double v) {
  if (v == 0 || !std::isfinite(v)) return std::isfinite(v) ? v : 0;
  double scale = std::pow(10.0, 3 - static_cast<int>(std::floor(std::log10(std::abs(v)))));
  return std::round(v * scale) / scale;
}

Expected<CallTotal> CallTotal::fromJson(const nlohmann::json& j) {
  if (!j.is_array() || j.size() != 2) return Error{"entry is not [count, ns]"};
  try {
    return CallTotal{json_fields::checkedGet<uint64_t>(j[0], "count"), json_fields::checkedGet<int64_t>(j[1], "ns")};
  } catch (const std::exception& e) {
    return Error{e.what()};
  }
}

void OtherOps::write(nlohmann::json& out, const MetricsWindow& w) {
  out = schema::toJson(CountAndNs{w.other_count, w.other_ns});
}

void OtherOps::read(const nlohmann::json& v, MetricsWindow& w, const char* what) {
  if (v.is_null()) return;
  CountAndNs other;
  schema::detail::readRecord(v, other, what);
  w.other_count = other.count;
  w.other_ns = other.ns;
}

void Syncs::write(nlohmann::json& out, const MetricsWindow& w) {
  SyncTotals totals{w.sync_count, w.sync_ns, {}};
  for (const HostSyncStats& s : w.syncs) totals.by[s.call] = {s.count, s.total_ns};
  out = schema::toJson(totals);
}

void Syncs::read(const nlohmann::json& v, MetricsWindow& w, const char* what) {
  if (v.is_null()) return;
  SyncTotals totals;
  schema::detail::readRecord(v, totals, what);
  w.sync_count = totals.count;
  w.sync_ns = totals.ns;
  w.syncs.clear();
  for (const auto& [call, c] : totals.by) w.syncs.push_back({call, c.count, c.ns});
}

}  // namespace metrics_codec

nlohmann::json toJson(const MetricsWindow& w) { return schema::toJson(w); }

Expected<MetricsWindow> metricsWindowFromJson(const nlohmann::json& j) { return schema::fromJson<MetricsWindow>(j); }

Expected<MetricsWindow> metricsWindowFromLine(std::string_view line) {
  nlohmann::json j = nlohmann::json::parse(line.begin(), line.end(), nullptr, /*allow_exceptions=*/false);
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

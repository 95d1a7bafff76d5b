#pragma once
// Reads what fixtures/call_log_profiler.cc logged: per process, the init call and every
// event with its start fields, recorded states in order, and whether it was stopped.
#include <dirent.h>

#include <cstdint>
#include <fstream>
#include <map>
#include <sstream>
#include <string>
#include <vector>

namespace testing {

struct LoggedEvent {
  uint64_t handle = 0;
  std::string type;
  uint64_t parent = 0;
  std::map<std::string, std::string> fields;  // start fields (rank, seq, peer, ch, ...)
  std::vector<int> states;
  std::vector<uint64_t> state_args;  // transSize / pTimer of each state
  bool stopped = false;
  size_t start_line = 0;
  size_t stop_line = 0;

  long num(const std::string& key) const {
    auto it = fields.find(key);
    return it == fields.end() ? -1 : std::stol(it->second);
  }
  const std::string& str(const std::string& key) const { return fields.at(key); }
};

struct ProcessLog {
  int pid = 0;
  std::map<std::string, std::string> init;  // the (first) init call
  int inits = 0;
  int finalizes = 0;
  std::vector<LoggedEvent> events;  // in start order; events[h - 1] has handle h

  int rank() const { return std::stoi(init.at("rank")); }
  const LoggedEvent* byHandle(uint64_t h) const { return h >= 1 && h <= events.size() ? &events[h - 1] : nullptr; }
  std::vector<const LoggedEvent*> ofType(const std::string& type) const {
    std::vector<const LoggedEvent*> out;
    for (const LoggedEvent& e : events)
      if (e.type == type) out.push_back(&e);
    return out;
  }
  std::vector<const LoggedEvent*> childrenOf(const LoggedEvent& parent, const std::string& type) const {
    std::vector<const LoggedEvent*> out;
    for (const LoggedEvent& e : events)
      if (e.type == type && e.parent == parent.handle) out.push_back(&e);
    return out;
  }
};

inline std::map<std::string, std::string> keyValues(std::istringstream& in) {
  std::map<std::string, std::string> kv;
  std::string token;
  while (in >> token) {
    const size_t eq = token.find('=');
    if (eq != std::string::npos) kv[token.substr(0, eq)] = token.substr(eq + 1);
  }
  return kv;
}

inline ProcessLog readProcessLog(const std::string& path) {
  ProcessLog log;
  log.pid = std::stoi(path.substr(path.rfind("/p") + 2));
  std::ifstream file(path);
  std::string line;
  for (size_t n = 0; std::getline(file, line); ++n) {
    std::istringstream in(line);
    std::string verb;
    in >> verb;
    auto kv = keyValues(in);
    if (verb == "init") {
      if (log.inits++ == 0) log.init = kv;
    } else if (verb == "finalize") {
      ++log.finalizes;
    } else if (verb == "start") {
      LoggedEvent e;
      e.handle = std::stoull(kv.at("h"));
      e.type = kv.at("type");
      e.parent = std::stoull(kv.at("parent"));
      e.fields = kv;
      e.start_line = n;
      log.events.resize(std::max<size_t>(log.events.size(), e.handle));
      log.events[e.handle - 1] = e;
    } else if (verb == "state" || verb == "stop") {
      const uint64_t h = std::stoull(kv.at("h"));
      if (h == 0 || h > log.events.size()) continue;
      LoggedEvent& e = log.events[h - 1];
      if (verb == "stop") {
        e.stopped = true;
        e.stop_line = n;
      } else {
        e.states.push_back(std::stoi(kv.at("s")));
        e.state_args.push_back(std::stoull(kv.at("size")));
      }
    }
  }
  return log;
}

// Every process's log in `dir`, by the rank its communicator init named.
inline std::map<int, ProcessLog> readCallLogs(const std::string& dir) {
  std::map<int, ProcessLog> logs;
  if (DIR* d = opendir(dir.c_str())) {
    while (dirent* entry = readdir(d)) {
      const std::string name = entry->d_name;
      if (name.size() < 6 || name[0] != 'p' || name.compare(name.size() - 4, 4, ".log") != 0) continue;
      ProcessLog log = readProcessLog(dir + "/" + name);
      if (log.inits > 0) logs[log.rank()] = std::move(log);
    }
    closedir(d);
  }
  return logs;
}

}  // namespace testing

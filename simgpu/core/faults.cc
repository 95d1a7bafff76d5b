#include "hangwatch/simgpu/faults.h"

#include <algorithm>
#include <charconv>
#include <cstdio>
#include <cstdlib>
#include <initializer_list>
#include <limits>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "hangwatch/simgpu/runtime.h"

namespace simgpu {
namespace {

using hangwatch::Error;
using hangwatch::Expected;

std::string_view trim(std::string_view s) {
  while (!s.empty() && (s.front() == ' ' || s.front() == '\t' || s.front() == '\n')) s.remove_prefix(1);
  while (!s.empty() && (s.back() == ' ' || s.back() == '\t' || s.back() == '\n')) s.remove_suffix(1);
  return s;
}

template <typename T>
bool parseInt(std::string_view s, T& out) {
  if (s.empty()) return false;
  auto [ptr, ec] = std::from_chars(s.data(), s.data() + s.size(), out);
  return ec == std::errc() && ptr == s.data() + s.size() && out >= 0;
}

bool parseFraction(std::string_view s, double& out) {
  if (s.empty()) return false;
  std::string text(s);
  char* end = nullptr;
  out = std::strtod(text.c_str(), &end);
  return end == text.c_str() + text.size() && out > 0.0 && out <= 1.0;
}

// "A->B"
bool parseLink(std::string_view s, int& from, int& to) {
  size_t arrow = s.find("->");
  if (arrow == std::string_view::npos) return false;
  return parseInt(s.substr(0, arrow), from) && parseInt(s.substr(arrow + 2), to) && from != to;
}

Error bad(std::string_view token, std::string_view why) {
  return Error{"bad fault '" + std::string(token) + "': " + std::string(why)};
}

// "HOST:DEVICE@op=K": DEVICE is one of simnccl's NICs (net_devices.h).
Expected<bool> parseDeadNic(std::string_view token, std::string_view body, FaultPlan& plan) {
  size_t at = body.find("@op=");
  if (at == std::string_view::npos) return bad(token, "expected '@op=K'");
  std::string_view who = body.substr(0, at);
  uint64_t op = 0;
  if (!parseInt(body.substr(at + 4), op)) return bad(token, "op index must be a non-negative integer");
  size_t colon = who.rfind(':');
  if (colon == std::string_view::npos || colon == 0) return bad(token, "expected HOST:DEVICE, e.g. node-1:mlx5_3");
  std::string_view device = who.substr(colon + 1);
  int index = 0;
  const bool ib = device.substr(0, 5) == "mlx5_" && parseInt(device.substr(5), index) && index < 8;
  if (!ib && device != "eth0") return bad(token, "DEVICE is one of simgpu's NICs: mlx5_0..mlx5_7 (IB) or eth0 (Socket)");
  plan.dead_nics.push_back({std::string(token), std::string(who.substr(0, colon)), std::string(device), op});
  return true;
}

// Parses one token into `plan`; returns an error naming the token.
Expected<bool> parseToken(std::string_view token, FaultPlan& plan) {
  size_t eq = token.find('=');
  if (eq == std::string_view::npos) return bad(token, "expected KIND=..., e.g. dead-rank=3@op=10");
  std::string_view kind = token.substr(0, eq);
  std::string_view body = token.substr(eq + 1);

  if (kind == "dead-rank" || kind == "dead-link" || kind == "lost-credit") {
    size_t at = body.find("@op=");
    if (at == std::string_view::npos) return bad(token, "expected '@op=K'");
    std::string_view who = body.substr(0, at);
    std::string_view rest = body.substr(at + 4);
    std::optional<int> channel;
    if (size_t comma = rest.find(','); comma != std::string_view::npos) {
      std::string_view opt = rest.substr(comma + 1);
      rest = rest.substr(0, comma);
      int c = 0;
      if (kind != "dead-link" || opt.substr(0, 8) != "channel=" || !parseInt(opt.substr(8), c))
        return bad(token, "the only option is ',channel=C' on dead-link");
      channel = c;
    }
    uint64_t op = 0;
    if (!parseInt(rest, op)) return bad(token, "op index must be a non-negative integer");
    if (kind == "dead-rank") {
      int rank = 0;
      if (!parseInt(who, rank)) return bad(token, "expected a rank number before '@'");
      plan.dead_ranks.push_back({std::string(token), rank, op});
    } else {
      int from = 0, to = 0;
      if (!parseLink(who, from, to)) return bad(token, "expected A->B with two different ranks");
      if (kind == "dead-link") plan.dead_links.push_back({std::string(token), from, to, op, channel});
      else plan.lost_credits.push_back({std::string(token), from, to, op});
    }
    return true;
  }
  if (kind == "slow-rank" || kind == "slow-link") {
    size_t colon = body.rfind(':');
    if (colon == std::string_view::npos) return bad(token, "expected ':F' with 0 < F <= 1");
    double fraction = 0;
    if (!parseFraction(body.substr(colon + 1), fraction)) return bad(token, "fraction F must be in (0, 1]");
    std::string_view who = body.substr(0, colon);
    if (kind == "slow-rank") {
      int rank = 0;
      if (!parseInt(who, rank)) return bad(token, "expected a rank number before ':'");
      plan.slow_ranks.push_back({std::string(token), rank, fraction});
    } else {
      int from = 0, to = 0;
      if (!parseLink(who, from, to)) return bad(token, "expected A->B with two different ranks");
      plan.slow_links.push_back({std::string(token), from, to, fraction});
    }
    return true;
  }
  if (kind == "dead-nic") return parseDeadNic(token, body, plan);
  return bad(token, "unknown fault kind (dead-rank, dead-link, lost-credit, slow-rank, slow-link, dead-nic)");
}

}  // namespace

const DeadRankFault* FaultPlan::deadRankAt(int rank, uint64_t op) const {
  for (const auto& f : dead_ranks)
    if (f.rank == rank && op >= f.op) return &f;
  return nullptr;
}

const DeadLinkFault* FaultPlan::deadLinkAt(int from, int to, uint64_t op, int channel) const {
  for (const auto& f : dead_links)
    if (f.from == from && f.to == to && op >= f.op && (!f.channel || *f.channel == channel)) return &f;
  return nullptr;
}

const LostCreditFault* FaultPlan::lostCreditAt(int from, int to, uint64_t op) const {
  for (const auto& f : lost_credits)
    if (f.from == from && f.to == to && op >= f.op) return &f;
  return nullptr;
}

const DeadNicFault* FaultPlan::deadNicAt(const std::string& host, const std::string& device, uint64_t op) const {
  for (const auto& f : dead_nics)
    if (f.host == host && f.device == device && op >= f.op) return &f;
  return nullptr;
}

double FaultPlan::rankSpeed(int rank) const {
  double s = 1.0;
  for (const auto& f : slow_ranks)
    if (f.rank == rank) s *= f.fraction;
  return s;
}

double FaultPlan::linkSpeed(int from, int to) const {
  double s = 1.0;
  for (const auto& f : slow_links)
    if (f.from == from && f.to == to) s *= f.fraction;
  return s;
}

Expected<bool> FaultPlan::checkRanksBelow(int world_size) const {
  auto check = [&](const std::string& token, std::initializer_list<int> ranks) -> Expected<bool> {
    for (int r : ranks)
      if (r >= world_size)
        return bad(token, fmt::format("rank {} does not exist in a job of {} ranks", r, world_size));
    return true;
  };
  for (const auto& f : dead_ranks)
    if (auto r = check(f.token, {f.rank}); !r) return r;
  for (const auto& f : dead_links)
    if (auto r = check(f.token, {f.from, f.to}); !r) return r;
  for (const auto& f : slow_ranks)
    if (auto r = check(f.token, {f.rank}); !r) return r;
  for (const auto& f : slow_links)
    if (auto r = check(f.token, {f.from, f.to}); !r) return r;
  for (const auto& f : lost_credits)
    if (auto r = check(f.token, {f.from, f.to}); !r) return r;
  return true;
}

Expected<FaultPlan> parseFaults(std::string_view spec) {
  FaultPlan plan;
  while (!spec.empty()) {
    size_t semi = spec.find(';');
    std::string_view token = trim(spec.substr(0, semi));
    spec = semi == std::string_view::npos ? std::string_view{} : spec.substr(semi + 1);
    if (token.empty()) continue;
    if (auto r = parseToken(token, plan); !r) return Error{r.error()};
  }
  return plan;
}

FaultLedger& FaultLedger::instance() {
  // Never freed: the report runs at exit, after static destructors may have.
  static FaultLedger* ledger = new FaultLedger();
  return *ledger;
}

void FaultLedger::fired(const std::string& token) {
  std::lock_guard lock(mutex_);
  fired_.insert(token);
}

void FaultLedger::noteFrom(const std::string& token, uint64_t from_op, uint64_t op, const char* algorithm,
                           const std::vector<int>& sends_to) {
  if (op < from_op) return;
  algorithms_[token].insert(algorithm);
  auto it = first_.find(token);
  if (it == first_.end() || op < it->second.op) first_[token] = FirstOp{op, algorithm, sends_to};
}

void FaultLedger::ran(const FaultPlan& plan, int self, uint64_t op, const char* algorithm,
                      const std::vector<int>& sends_to) {
  if (plan.empty()) return;
  std::lock_guard lock(mutex_);
  ops_[self] = std::max(ops_[self], op + 1);
  sent_to_[self].insert(sends_to.begin(), sends_to.end());
  for (const DeadLinkFault& f : plan.dead_links)
    if (f.from == self) noteFrom(f.token, f.op, op, algorithm, sends_to);
  for (const LostCreditFault& f : plan.lost_credits)
    if (f.from == self) noteFrom(f.token, f.op, op, algorithm, sends_to);
  for (const DeadRankFault& f : plan.dead_ranks)
    if (f.rank == self) noteFrom(f.token, f.op, op, algorithm, sends_to);
  for (const DeadNicFault& f : plan.dead_nics) {
    auto owner = nic_owner_.find(f.token);
    if (owner != nic_owner_.end() && owner->second == self) noteFrom(f.token, f.op, op, algorithm, sends_to);
  }
}

void FaultLedger::usesNic(const FaultPlan& plan, int self, const std::string& host, const std::string& device) {
  std::lock_guard lock(mutex_);
  for (const DeadNicFault& f : plan.dead_nics)
    if (f.host == host && f.device == device) nic_owner_.try_emplace(f.token, self);
}

void FaultLedger::sawNic(const std::string& host, const std::string& device) {
  std::lock_guard lock(mutex_);
  nics_seen_.insert(host + ":" + device);
}

void FaultLedger::reportAtExit() {
  static std::once_flag registered;
  std::call_once(registered, [] { std::atexit(report); });
}

void FaultLedger::report() {
  FaultLedger& ledger = instance();
  {
    std::lock_guard lock(ledger.mutex_);
    if (ledger.reported_) return;
    ledger.reported_ = true;
  }
  const Expected<FaultPlan>& faults = processFaults();
  if (!faults) return;
  for (const std::string& line : ledger.unfired(*faults, processRank())) std::fprintf(stderr, "simgpu: %s\n", line.c_str());
  std::fflush(stderr);
}

std::vector<std::string> FaultLedger::unfired(const FaultPlan& plan, int device_rank) const {
  std::lock_guard lock(mutex_);
  std::vector<std::string> out;
  auto never = [&](const std::string& token, const std::string& why) {
    if (!fired_.count(token)) out.push_back(fmt::format("fault '{}' never took effect: {}", token, why));
  };
  auto ran_as = [&](int rank) { return ops_.count(rank) > 0; };
  auto not_reached = [&](int rank, uint64_t op) {
    return fmt::format("rank {} never ran its op {} (it ran {} operation(s) on its communicators)", rank, op,
                       ops_.at(rank));
  };
  // A link fault's sender: its op was never reached, or nothing went on that connection.
  auto link = [&](const std::string& token, int from, int to, uint64_t op) {
    auto first = first_.find(token);
    if (first == first_.end()) return never(token, not_reached(from, op));
    const FirstOp& f = first->second;
    const std::set<std::string>& algos = algorithms_.at(token);
    never(token, fmt::format("from op {} on, rank {} sent nothing to rank {}: op {} ran {}, whose connections from "
                             "rank {} go to rank(s) {}{}",
                             op, from, to, f.op, f.algorithm, from,
                             f.sends_to.empty() ? std::string("none") : fmt::format("{}", fmt::join(f.sends_to, ", ")),
                             algos.size() > 1 ? fmt::format(" (the ops since ran {})", fmt::join(algos, ", ")) : ""));
  };
  for (const DeadLinkFault& f : plan.dead_links)
    if (ran_as(f.from)) link(f.token, f.from, f.to, f.op);
  for (const LostCreditFault& f : plan.lost_credits)
    if (ran_as(f.from)) link(f.token, f.from, f.to, f.op);
  for (const DeadRankFault& f : plan.dead_ranks)
    if (ran_as(f.rank) && !first_.count(f.token)) never(f.token, not_reached(f.rank, f.op));
  for (const SlowLinkFault& f : plan.slow_links)
    if (ran_as(f.from) && !sent_to_.at(f.from).count(f.to))
      never(f.token, fmt::format("rank {} never sent to rank {}", f.from, f.to));
  for (const SlowRankFault& f : plan.slow_ranks)
    if (f.rank == device_rank && ran_as(f.rank)) never(f.token, fmt::format("rank {} ran no GEMM, copy or kernel", f.rank));
  for (const DeadNicFault& f : plan.dead_nics) {
    auto owner = nic_owner_.find(f.token);
    if (owner != nic_owner_.end()) {
      int rank = owner->second;
      auto first = first_.find(f.token);
      if (first == first_.end()) never(f.token, not_reached(rank, f.op));
      else
        never(f.token, fmt::format("from op {} on, no connection of rank {} (whose GPU uses {}'s {}) crossed nodes: "
                                   "op {} ran {}", f.op, rank, f.host, f.device, first->second.op,
                                   fmt::join(algorithms_.at(f.token), ", ")));
    } else if (device_rank == 0 && !nics_seen_.empty() && !nics_seen_.count(f.host + ":" + f.device)) {
      never(f.token, fmt::format("no rank of this job uses {}'s {} (the NICs its ranks use: {})", f.host, f.device,
                                 fmt::join(nics_seen_, ", ")));
    }
  }
  return out;
}

// Never freed: stream workers and the exit report may first ask for it while static
// destructors run at exit, and a destroyed plan reads as garbage there.
const Expected<FaultPlan>& processFaults() {
  static const Expected<FaultPlan>* plan = [] {
    const char* spec = std::getenv("SIMGPU_FAULTS");
    return new Expected<FaultPlan>(parseFaults(spec ? spec : ""));
  }();
  return *plan;
}

}  // namespace simgpu

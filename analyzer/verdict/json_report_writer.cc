#include "hangwatch/verdict/gpu_ranks.h"
#include "hangwatch/verdict/json_report_writer.h"

namespace hangwatch::verdict {
namespace {

nlohmann::json verdictJson(const Verdict& v) {
  nlohmann::json j;
  j["kind"] = verdictKindName(v.kind);
  j["headline"] = v.headline;
  j["culprit_ranks"] = v.culprit_ranks;
  j["culprit_link"] = v.culprit_link ? nlohmann::json{{"from", v.culprit_link->from}, {"to", v.culprit_link->to}}
                                     : nlohmann::json(nullptr);
  j["culprit_link_ranks"] = v.link_in_comm_ranks ? "communicator" : "global";
  nlohmann::json nics = nlohmann::json::array();
  for (const LinkNic& n : v.culprit_link_nics)
    nics.push_back({{"rank", n.rank},
                    {"end", n.sends ? "send" : "recv"},
                    {"host", n.host},
                    {"index", n.index},
                    {"device", n.device.empty() ? nlohmann::json(nullptr) : nlohmann::json(n.device)},
                    {"port", n.port ? nlohmann::json(*n.port) : nlohmann::json(nullptr)},
                    {"source", n.source}});
  j["culprit_link_nics"] = std::move(nics);
  j["communicator"] = v.communicator.empty() ? nlohmann::json(nullptr) : nlohmann::json(v.communicator);
  j["op"] = v.op ? nlohmann::json{{"name", v.op->name}, {"seq", v.op->seq ? nlohmann::json(*v.op->seq) : nlohmann::json(nullptr)}}
                 : nlohmann::json(nullptr);
  j["evidence"] = v.evidence;
  j["next_steps"] = v.next_steps;
  j["reason"] = v.reason.empty() ? nlohmann::json(nullptr) : nlohmann::json(v.reason);
  j["channels_agree"] = v.channels_agree;
  j["channels_total"] = v.channels_total;
  nlohmann::json where = nlohmann::json::array();
  for (const CulpritStack& c : v.where) where.push_back({{"rank", c.rank}, {"thread", c.thread}, {"frames", c.frames}});
  j["where"] = std::move(where);
  j["source"] = v.source.empty() ? nlohmann::json(nullptr) : nlohmann::json(v.source);
  j["confident"] = v.confident;
  j["hinges_on"] = v.hinges_on.empty() ? nlohmann::json(nullptr) : nlohmann::json(v.hinges_on);
  nlohmann::json suspects = nlohmann::json::array();
  for (const Suspect& s : v.suspects) {
    nlohmann::json link = nullptr;
    if (s.link) link = {{"from", s.link->from}, {"to", s.link->to < 0 ? nlohmann::json(nullptr) : nlohmann::json(s.link->to)}};
    suspects.push_back({{"ranks", s.ranks}, {"link", std::move(link)}, {"text", s.text}, {"hosts", s.hosts}});
  }
  j["suspects"] = std::move(suspects);
  nlohmann::json lacking = nlohmann::json::array();
  for (const DataGap& g : v.lacking_data) lacking.push_back({{"rank", g.rank}, {"lacks", g.lacks}});
  j["lacking_data"] = std::move(lacking);
  nlohmann::json places = nlohmann::json::array();
  for (const RankPlaceInJob& p : v.places)
    places.push_back({{"rank", p.rank}, {"stage", p.stage}, {"stages", p.stages}, {"stage_ranks", p.stage_ranks},
                      {"groups", p.groups}});
  j["pipeline_places"] = std::move(places);
  return j;
}

}  // namespace

nlohmann::json JsonReportWriter::toJson(const Report& r) {
  nlohmann::json j;
  j["schema_version"] = 1;
  j["job_dir"] = r.job.job_dir;
  j["job_id"] = r.job.job_id;
  j["world_size"] = r.job.world_size;
  if (!r.job.gpu_ranks.empty()) {
    // The report's ranks are GPU ranks (DESIGN.md §3): each with its process's launcher rank.
    nlohmann::json gpus = nlohmann::json::array();
    for (const GpuRank& g : r.job.gpu_ranks)
      gpus.push_back({{"rank", g.rank}, {"process", g.process}, {"pid", g.pid}, {"host", g.host}, {"gpu", g.device}});
    j["ranks_are"] = "gpu";
    j["processes"] = r.job.processes;
    j["gpu_ranks"] = std::move(gpus);
    j["gpu_ranks_communicator"] = r.job.gpu_ranks_comm;
  } else {
    j["ranks_are"] = "launcher";
  }
  j["stage"] = stageName(r.job.stage);
  if (r.job.stage == Stage::kSuspected) {
    const SuspectSummary& s = r.job.suspect;
    j["suspect"] = {{"episode", s.episode},
                    {"resumed_ranks", s.resumed},
                    {"resumed_after_s", s.resumed.empty() ? nlohmann::json(nullptr) : nlohmann::json(s.resumed_after_s)}};
  }
  const AttemptInfo& a = r.job.attempt;
  j["attempt"] = {{"name", a.name},
                  {"number", a.number},
                  {"count", a.count},
                  {"restart", a.restart ? nlohmann::json(*a.restart) : nlohmann::json(nullptr)},
                  {"started_unix_s", a.started_unix_s > 0 ? nlohmann::json(a.started_unix_s) : nlohmann::json(nullptr)}};
  j["verdict"] = verdictJson(r.verdict);
  j["ranks_answered"] = r.job.ranks.size();
  j["ranks_missing"] = r.job.ranks_missing;
  j["ranks_collecting"] = r.job.ranks_collecting;
  nlohmann::json partial = nlohmann::json::array();
  for (const PartialRank& p : r.job.ranks_partial) partial.push_back({{"rank", p.rank}, {"missing", p.missing}, {"reason", p.reason}});
  j["ranks_partial"] = std::move(partial);
  j["problems"] = r.job.problems;
  if (r.job.trigger) {
    j["trigger"] = hangwatch::toJson(*r.job.trigger);
    if (r.job.trigger_process) j["trigger"]["process"] = *r.job.trigger_process;
  }
  else j["trigger"] = nullptr;
  nlohmann::json classes = nlohmann::json::array();
  for (const stackmerge::StackClass& c : r.stack_classes) {
    nlohmann::json threads = nlohmann::json::array();
    for (size_t i = 0; i < c.thread_stacks.size(); ++i) {
      threads.push_back({{"name", i < c.thread_names.size() ? c.thread_names[i] : ""}, {"frames", c.thread_stacks[i]}});
    }
    classes.push_back({{"ranks", c.ranks.toVector()}, {"ranks_text", c.ranks.toString()}, {"size", c.ranks.size()},
                       {"threads", std::move(threads)}});
  }
  j["stack_classes"] = std::move(classes);
  nlohmann::json nodes = nlohmann::json::array();
  for (const NodeRanks& n : r.nodes)
    nodes.push_back({{"host", n.host}, {"ranks", n.ranks.toVector()}, {"ranks_text", n.ranks.toString()}, {"size", n.ranks.size()}});
  j["nodes"] = std::move(nodes);
  return j;
}

}  // namespace hangwatch::verdict

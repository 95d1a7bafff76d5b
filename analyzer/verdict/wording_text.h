#pragma once
// Phrases the verdict wording files share (wording_text.cc); private to analyzer/verdict.
#include <string>
#include <utility>
#include <vector>

#include "hangwatch/verdict/verdict_wording.h"

namespace hangwatch::verdict::wording {

// What a gap means for the sentence: "did not dump", "is still being collected", ...
std::pair<std::string, std::string> gapVerb(const DataGap& g);
// "AllReduce (1024 float)": a group's operation and shape.
std::string opShape(const OpGroup& g);
// "1-3,7".
std::string ranksText(const std::vector<int>& ranks);
// "12.5 s".
std::string seconds(double s);
// "AllReduce seq 7 on communicator 0x..".
std::string opText(const HangFocus& f);
// A send or receive: no sequence number of its communicator's (a HangFocus of one has seq 0).
bool isTransferOp(const std::string& op);
// "GPU 2 on host h"; "" when unknown.
std::string deviceText(const JobData& job, int rank);
// "rank(s) 2 (host b, GPU 6, pid 7, from its metrics)": missing ranks, each placed where the
// job's files say it ran (a node peer's word, its metrics windows); "rank(s) 2" when none do.
std::string missingRanksPlaced(const JobData& job, const std::vector<int>& ranks);
// "rank 5", "ranks 5 and 6", "ranks 4, 5 and 6"; long lists as compact ranges.
std::string ranksPhrase(std::vector<int> ranks);
// "5 -> 6", "the link out of rank 5".
std::string linkText(const Link& l);
// "1 -> 2, 3 -> 4".
std::string linksText(const std::vector<Link>& links);
// "1 -> 2, rank 3 or 4 -> 5": a suspect link by its connection, anything else by its text.
std::string suspectsText(const std::vector<Suspect>& suspects);
// "ranks 5 and 6 did not dump", "rank 5 did not dump, rank 6 has no ring progress".
std::string gapsSentence(const std::vector<DataGap>& gaps);
// One sentence of what the profiler's progress shows.
std::string proxySummary(const ProxyFinding& pf);
// "Rank 5 ...": the sentence's first letter upper-case.
std::string capitalized(std::string s);

}  // namespace hangwatch::verdict::wording

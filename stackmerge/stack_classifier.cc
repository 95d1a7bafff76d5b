#include "hangwatch/stackmerge/stack_classifier.h"

#include <algorithm>
#include <map>


namespace hangwatch::stackmerge {

void StackClassifier::addRank(int rank, const std::vector<ThreadStack>& threads) {
  RankEntry entry;
  entry.rank = rank;
  entry.threads.reserve(threads.size());
  for (const auto& t : threads) entry.threads.push_back({names_.intern(t.name), tree_.addPath(rank, t)});
  ranks_.push_back(std::move(entry));
}

void StackClassifier::addRank(int rank, const std::vector<RankThread>& threads, const StackTable& table) {
  RankEntry entry;
  entry.rank = rank;
  entry.threads.reserve(threads.size());
  for (const RankThread& t : threads) {
    if (t.stack >= node_of_table_stack_.size()) node_of_table_stack_.resize(t.stack + 1, UINT32_MAX);
    uint32_t& node = node_of_table_stack_[t.stack];
    if (node == UINT32_MAX) node = tree_.addPath(rank, table.frames(t.stack));
    else tree_.addThreadAt(rank, node);
    entry.threads.push_back({names_.intern(t.name), node});
  }
  ranks_.push_back(std::move(entry));
}

std::vector<StackClass> StackClassifier::classes() const {
  // A name whose threads show more than one stack anywhere is what tells ranks apart.
  constexpr uint32_t kUnseen = UINT32_MAX;
  constexpr uint32_t kVaries = UINT32_MAX - 1;
  std::vector<uint32_t> stack_of_name(names_.size(), kUnseen);
  for (const auto& r : ranks_)
    for (const auto& t : r.threads) {
      uint32_t& s = stack_of_name[t.name];
      if (s == kUnseen) s = t.stack;
      else if (s != t.stack) s = kVaries;
    }

  std::vector<const RankEntry*> order;
  order.reserve(ranks_.size());
  for (const auto& r : ranks_) order.push_back(&r);
  std::stable_sort(order.begin(), order.end(), [](const RankEntry* a, const RankEntry* b) { return a->rank < b->rank; });

  struct Group {
    RankSet ranks;
    const RankEntry* representative = nullptr;
    int first_rank = 0;
  };
  std::map<std::vector<uint32_t>, size_t> group_of_signature;
  std::vector<Group> groups;
  std::vector<uint32_t> signature;
  constexpr uint32_t kNoThreads = UINT32_MAX;
  for (const RankEntry* r : order) {
    signature.clear();
    // A rank without any stack (collection failed) is unlike a rank whose threads all agree.
    if (r->threads.empty()) signature.push_back(kNoThreads);
    for (const auto& t : r->threads)
      if (stack_of_name[t.name] == kVaries) signature.push_back(t.stack);
    std::sort(signature.begin(), signature.end());
    auto [it, added] = group_of_signature.try_emplace(signature, groups.size());
    if (added) groups.push_back(Group{{}, r, r->rank});
    groups[it->second].ranks.insert(r->rank);
  }
  std::stable_sort(groups.begin(), groups.end(), [](const Group& a, const Group& b) {
    return a.ranks.size() != b.ranks.size() ? a.ranks.size() > b.ranks.size() : a.first_rank < b.first_rank;
  });

  std::vector<StackClass> out;
  out.reserve(groups.size());
  for (auto& g : groups) {
    StackClass c;
    c.ranks = std::move(g.ranks);
    const auto& threads = g.representative->threads;
    const bool any_varies = std::any_of(threads.begin(), threads.end(),
                                        [&](const ThreadEntry& t) { return stack_of_name[t.name] == kVaries; });
    for (const auto& t : threads) {
      if (any_varies && stack_of_name[t.name] != kVaries) continue;
      c.thread_names.emplace_back(names_.label(t.name));
      c.thread_stacks.push_back(tree_.stackOf(t.stack));
    }
    out.push_back(std::move(c));
  }
  return out;
}

std::vector<StackClass> StackClassifier::outliers() const {
  std::vector<StackClass> all = classes();
  std::vector<StackClass> out;
  if (all.size() < 2) return out;
  const size_t largest = all.front().ranks.size();
  for (size_t i = 1; i < all.size(); ++i)
    if (all[i].ranks.size() * 3 <= largest) out.push_back(std::move(all[i]));
  return out;
}

}  // namespace hangwatch::stackmerge

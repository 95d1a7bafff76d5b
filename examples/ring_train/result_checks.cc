#include "result_checks.h"

#include <mpi.h>

#include <cstdio>
#include <cstdlib>

#include "gpu_check.h"
#include "patterns.h"

namespace {

void checkElement(float got, float expected, size_t index, int rank, int step) {
  if (got == expected) return;
  std::printf("%s rank=%d FAIL step=%d index=%zu expected=%g got=%g\n", CheckIdentity::program, rank, step, index,
              static_cast<double>(expected), static_cast<double>(got));
  std::fflush(stdout);
  abortJob(3);
}

}  // namespace

void checkSumOf(const float* got, size_t count, Pattern pattern, const std::vector<int>& ids, int rank, int step) {
  // Patterns repeat every 17 elements; summing one period keeps the check O(count).
  float period[17] = {};
  for (size_t i = 0; i < 17; ++i)
    for (int id : ids) period[i] += patternValue(pattern, id, step, i);
  for (size_t i = 0; i < count; ++i) checkElement(got[i], period[i % 17], i, rank, step);
}

void checkPattern(const float* got, size_t count, Pattern pattern, int id, int rank, int step) {
  checkSumOf(got, count, pattern, {id}, rank, step);
}

void checkAllReduce(const float* got, size_t count, int world_size, int rank, int step) {
  std::vector<int> all(world_size);
  for (int r = 0; r < world_size; ++r) all[r] = r;
  checkSumOf(got, count, Pattern::Gradient, all, rank, step);
}

void checkAllGather(const float* got, size_t shard, int first_global, int group_size, int rank, int step) {
  for (int j = 0; j < group_size; ++j)
    for (size_t i = 0; i < shard; ++i)
      checkElement(got[j * shard + i], patternValue(Pattern::TpShard, first_global + j, step, i), j * shard + i,
                   rank, step);
}

void checkReduceScatter(const float* got, size_t block, int first_global, int group_size, int group_rank,
                        int rank, int step) {
  for (size_t i = 0; i < block; ++i) {
    float expected = 0.0f;
    for (int j = 0; j < group_size; ++j)
      expected += patternValue(Pattern::TpPartial, first_global + j, step, group_rank * block + i);
    checkElement(got[i], expected, i, rank, step);
  }
}

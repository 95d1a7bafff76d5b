#pragma once
// Checks of collective results against patterns.h. A wrong element is reported as
// `<program> rank=R FAIL step=S index=I expected=E got=G` and aborts the job: a
// silently wrong collective must never look like a healthy run.
#include <cstddef>
#include <vector>

#include "patterns.h"

// Sum over `world_size` ranks of Pattern::Gradient.
void checkAllReduce(const float* got, size_t count, int world_size, int rank, int step);

// Exactly patternValue(pattern, id, step, i) for i < count.
void checkPattern(const float* got, size_t count, Pattern pattern, int id, int rank, int step);

// The sum over `ids` of patternValue(pattern, id, step, i).
void checkSumOf(const float* got, size_t count, Pattern pattern, const std::vector<int>& ids, int rank, int step);

// `group_size` shards of `shard` elements, shard j from global rank first_global + j.
void checkAllGather(const float* got, size_t shard, int first_global, int group_size, int rank, int step);

// This member's block of the sum of the members' Pattern::TpPartial buffers.
void checkReduceScatter(const float* got, size_t block, int first_global, int group_size, int group_rank,
                        int rank, int step);

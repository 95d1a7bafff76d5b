#pragma once
// The fields the metrics and timeline window files both start with: the schema version
// and who wrote the file (rank, host, pid, CUDA device). Listed once for both windows' field lists.
#include <tuple>

#include "hangwatch/common/schema/field_list.h"

namespace hangwatch::schema {

template <typename Window>
constexpr auto windowIdentityFields() {
  return std::tuple{
      field("v", &Window::schema_version, "v"),
      field("rank", &Window::rank, "rank"),
      field("host", &Window::host, "host"),
      field("pid", &Window::pid, "pid"),
      field("dev", &Window::device, "dev", Empty::kOmit),
  };
}

}  // namespace hangwatch::schema

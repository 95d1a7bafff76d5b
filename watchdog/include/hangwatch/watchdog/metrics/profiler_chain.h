#pragma once
// The profiler plugin libhangwatch.so exports: hangwatch's own link profiler
// (link_profiler.h), chained with the profiler plugin the job itself chose, if any, so
// that a job keeps its profiler and hangwatch still sees network proxy steps.
//
// The job's choice (NCCL_PROFILER_PLUGIN from the environment or NCCL's conf files,
// else NCCL's default libnccl-profiler.so) is handed over in HANGWATCH_JOB_PROFILER_PLUGIN
// (profiler_plugin_choice.h) and loaded with NCCL's own name rules at the first init.
// Every callback goes to both plugins; each sees only its own contexts and handles.
// Under PXN an operation of another local process arrives with that process's context:
// neither plugin is given anything to dereference (the job's plugin gets a null context).
// Without a job plugin the callbacks go straight to hangwatch's, with no wrapping.
#include "hangwatch/common/nccl_profiler_v5.h"

namespace hangwatch::watchdog {

// The callback table exported as `ncclProfiler_v5`.
const nccl_profiler::ProfilerV5& chainedProfiler();

// The environment variable that carries the job's own plugin choice to the chain.
inline constexpr const char* kJobProfilerPluginVar = "HANGWATCH_JOB_PROFILER_PLUGIN";

}  // namespace hangwatch::watchdog

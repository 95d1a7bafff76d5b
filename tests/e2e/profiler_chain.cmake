# The job's own NCCL profiler plugin behind the watchdog's (issue 16).
if(TARGET forensics AND TARGET recording_profiler_fixture)
  hangwatch_e2e_test(profiler_chain.conf_file test_profiler_chain.JobProfilerPlugin 120)
  set_property(TEST e2e.profiler_chain.conf_file APPEND PROPERTY ENVIRONMENT
               FORENSICS=$<TARGET_FILE:forensics> RECORDING_PROFILER=$<TARGET_FILE:recording_profiler_fixture>)
  set_property(TEST e2e.profiler_chain.conf_file PROPERTY RUN_SERIAL TRUE)
endif()

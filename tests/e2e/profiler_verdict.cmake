# A verdict from the snapshots alone, from NCCL's profiler events (issue 12).
if(TARGET forensics)
  hangwatch_e2e_test(profiler_verdict.eight_ranks_dead_link
                     test_profiler_verdict.SnapshotsOnly.test_eight_ranks_dead_link_named_from_the_snapshots 240)
  set_property(TEST e2e.profiler_verdict.eight_ranks_dead_link
               APPEND PROPERTY ENVIRONMENT FORENSICS=$<TARGET_FILE:forensics>)
endif()

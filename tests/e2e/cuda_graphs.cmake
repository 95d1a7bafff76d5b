# CUDA graphs under the watchdog (issue 13).
if(TARGET forensics)
  hangwatch_e2e_test(cuda_graphs.replayed_allreduce test_cuda_graphs.ReplayedAllReduce 180)
  hangwatch_e2e_test(cuda_graphs.link_dies_during_replay test_cuda_graphs.LinkDiesDuringReplay 240)
  set_property(TEST e2e.cuda_graphs.replayed_allreduce e2e.cuda_graphs.link_dies_during_replay
               APPEND PROPERTY ENVIRONMENT FORENSICS=$<TARGET_FILE:forensics>)
endif()

# Non-blocking communicators under the watchdog (issue 13).
if(TARGET forensics)
  hangwatch_e2e_test(nonblocking.healthy test_nonblocking.HealthyNonBlocking 180)
  hangwatch_e2e_test(nonblocking.dead_link test_nonblocking.DeadLinkNonBlocking 240)
  set_property(TEST e2e.nonblocking.healthy e2e.nonblocking.dead_link
               APPEND PROPERTY ENVIRONMENT FORENSICS=$<TARGET_FILE:forensics>)
endif()

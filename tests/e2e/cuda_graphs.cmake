# CUDA graphs under the watchdog (issue 13).
if(TARGET forensics)
  hangwatch_e2e_test(cuda_graphs.replayed_allreduce test_cuda_graphs.ReplayedAllReduce 180)
  hangwatch_e2e_test(cuda_graphs.link_dies_during_replay test_cuda_graphs.LinkDiesDuringReplay 240)
  set_property(TEST e2e.cuda_graphs.replayed_allreduce e2e.cuda_graphs.link_dies_during_replay
               APPEND PROPERTY ENVIRONMENT FORENSICS=$<TARGET_FILE:forensics>)
endif()

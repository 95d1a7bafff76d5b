# Ring progress (issue 4): the collector's debugger phase reads every ring connection's
# stop point on simgpu; see gdb-scripts/README.md.
if(TARGET forensics)
  hangwatch_e2e_test(ring_progress.dead_link_four_ranks
                     test_ring_progress.DeadLinkRingProgress.test_four_ranks_show_the_dead_link_with_least_progress_on_every_channel 150)
  hangwatch_e2e_test(ring_progress.dead_link_eight_ranks
                     test_ring_progress.DeadLinkRingProgress.test_eight_ranks_show_the_dead_link_with_least_progress_on_every_channel 240)
  hangwatch_e2e_test(ring_progress.dead_rank
                     test_ring_progress.DeadRankRingProgress.test_both_neighbours_connections_toward_the_dead_rank_show_least_progress 150)
  # The cuda backend in a live process with the real libnccl.so.2 (issue 12; skips without one).
  hangwatch_e2e_test(ring_progress.cuda_backend_real_libnccl test_cuda_backend_live 120)
  set_property(TEST e2e.ring_progress.dead_link_four_ranks e2e.ring_progress.dead_link_eight_ranks
               e2e.ring_progress.dead_rank e2e.ring_progress.cuda_backend_real_libnccl
               APPEND PROPERTY ENVIRONMENT FORENSICS=$<TARGET_FILE:forensics>)
endif()

# A verdict from the snapshots alone, from NCCL's profiler events (issue 12).
if(TARGET forensics)
  hangwatch_e2e_test(profiler_verdict.eight_ranks_dead_link
                     test_profiler_verdict.SnapshotsOnly.test_eight_ranks_dead_link_named_from_the_snapshots 240)
  # Two machines' worth of ranks (each rank its own hostname): the plugin's view of network
  # links, the honest narrowing inside a node, and the debugger's view inside it.
  foreach(case IN ITEMS dead_network_link_named_from_the_plugin
                        dead_link_inside_a_node_narrowed_to_its_node_without_the_debugger
                        dead_link_inside_a_node_named_from_the_debugger
                        dead_rank_inside_a_node_narrowed_to_its_node_without_the_debugger
                        dead_nic_named_with_the_link_it_stopped
                        dead_nic_named_without_the_debugger_from_nccls_info_lines
                        a_jobs_own_nccl_debug_is_kept_and_the_nic_is_then_not_named
                        dead_nic_carrying_both_links_of_a_rank_named_beside_it)
    hangwatch_e2e_test(profiler_verdict.two_nodes.${case} test_profiler_verdict.TwoNodes.test_${case} 240)
  endforeach()
  foreach(t IN ITEMS eight_ranks_dead_link two_nodes.dead_network_link_named_from_the_plugin
                     two_nodes.dead_link_inside_a_node_narrowed_to_its_node_without_the_debugger
                     two_nodes.dead_link_inside_a_node_named_from_the_debugger
                     two_nodes.dead_rank_inside_a_node_narrowed_to_its_node_without_the_debugger
                     two_nodes.dead_nic_named_with_the_link_it_stopped
                     two_nodes.dead_nic_named_without_the_debugger_from_nccls_info_lines
                     two_nodes.a_jobs_own_nccl_debug_is_kept_and_the_nic_is_then_not_named
                     two_nodes.dead_nic_carrying_both_links_of_a_rank_named_beside_it)
    set_property(TEST e2e.profiler_verdict.${t} APPEND PROPERTY ENVIRONMENT FORENSICS=$<TARGET_FILE:forensics>)
  endforeach()
endif()

# Abort mode under launchers that kill the job when one rank exits (issue #18): mpirun, and
# the torchrun- and srun-like launchers in launchers/. The binary comes in through FORENSICS.
if(TARGET forensics)
  hangwatch_e2e_test(launchers.mpirun_kill_on_exit
                     test_launchers.MpirunKillOnExit.test_mpirun_kills_the_job_only_after_every_rank_is_done 300)
  hangwatch_e2e_test(launchers.torchrun_dead_rank
                     test_launchers.TorchrunLikeLauncher.test_dead_rank_on_six_ranks_under_a_torchrun_like_launcher 300)
  hangwatch_e2e_test(launchers.torchrun_sigterm_while_dumping
                     test_launchers.TorchrunLikeLauncher.test_sigterm_from_the_launcher_while_dumping_loses_nothing 300)
  hangwatch_e2e_test(launchers.srun_host_loop
                     test_launchers.SrunLikeLauncher.test_rank_stuck_in_host_code_under_an_srun_like_launcher 300)
  set_property(TEST e2e.launchers.mpirun_kill_on_exit e2e.launchers.torchrun_dead_rank
               e2e.launchers.torchrun_sigterm_while_dumping e2e.launchers.srun_host_loop
               APPEND PROPERTY ENVIRONMENT FORENSICS=$<TARGET_FILE:forensics>)
endif()

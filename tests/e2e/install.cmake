# Installed like real software (issues 14, 30): a hung job from an installed, moved prefix
# with the build tree's copies and the build machine's libraries hidden; the installed
# library's C-library-only dependencies; a C program and the collector without a C++
# runtime; the .deb; the README's cluster snippets.
if(TARGET forensics AND TARGET hangwatch)
  hangwatch_e2e_test(install.prefix_job
                     test_install.InstalledPrefix.test_hung_job_run_from_the_installed_prefix_alone_names_the_dead_link 240)
  hangwatch_e2e_test(install.libc_only
                     test_install.InstalledPrefix.test_installed_library_needs_only_the_c_library_at_glibc_2_28 60)
  hangwatch_e2e_test(install.without_cxx_runtime
                     test_install.InstalledPrefix.test_c_program_starts_with_the_preload_and_forensics_runs_without_a_cxx_runtime
                     90)
  hangwatch_e2e_test(install.deb
                     test_install.DebianPackage.test_deb_holds_the_install_under_usr_and_depends_on_its_libraries_and_gdb
                     180)
  set_property(TEST e2e.install.prefix_job e2e.install.libc_only e2e.install.without_cxx_runtime e2e.install.deb
               APPEND PROPERTY ENVIRONMENT HANGWATCH_BUILD_DIR=${CMAKE_BINARY_DIR})
endif()
hangwatch_e2e_test(install.cluster_snippets test_cluster_snippets 30)

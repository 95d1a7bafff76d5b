# `cmake --install` and `cpack -G DEB` (README "Install"): the watchdog, the collector,
# its gdb scripts, the example alert rules and the docs, in the GNU layout. The prefix is
# relocatable: the library finds the collector and the collector its scripts at the
# same relative place as here, wherever the prefix ends up.
include(GNUInstallDirs)

install(TARGETS hangwatch LIBRARY DESTINATION ${CMAKE_INSTALL_LIBDIR})
install(TARGETS forensics RUNTIME DESTINATION ${CMAKE_INSTALL_BINDIR})
set(hangwatch_datadir ${CMAKE_INSTALL_DATADIR}/hangwatch)
# simgpu's drop-in CUDA/cuBLAS/NCCL/driver libraries (simgpu/dropin), one folder for
# LD_LIBRARY_PATH, with simgpu-run beside them (programs that find theirs by RPATH): a real
# program tried on the emulator without a GPU.
if(TARGET dropin_cudart)
  set(dropin_targets dropin_cudart dropin_cublas dropin_cublasLt dropin_nccl dropin_cuda)
  set_target_properties(${dropin_targets} PROPERTIES INSTALL_RPATH "$ORIGIN")
  install(TARGETS ${dropin_targets} LIBRARY DESTINATION ${CMAKE_INSTALL_LIBDIR}/hangwatch/simgpu NAMELINK_SKIP)
  install(PROGRAMS ${PROJECT_SOURCE_DIR}/simgpu/dropin/simgpu-run DESTINATION ${CMAKE_INSTALL_LIBDIR}/hangwatch/simgpu)
endif()
install(DIRECTORY ${PROJECT_SOURCE_DIR}/gdb-scripts/ DESTINATION ${hangwatch_datadir}/gdb-scripts
        PATTERN tests EXCLUDE PATTERN __pycache__ EXCLUDE PATTERN README.md EXCLUDE)
install(FILES ${PROJECT_SOURCE_DIR}/examples/prometheus/hangwatch.rules.yml
        DESTINATION ${hangwatch_datadir}/prometheus)
install(FILES ${PROJECT_SOURCE_DIR}/README.md DESTINATION ${CMAKE_INSTALL_DOCDIR})
# The README's links (docs/...) resolve in the installed doc folder too.
install(DIRECTORY ${PROJECT_SOURCE_DIR}/docs DESTINATION ${CMAKE_INSTALL_DOCDIR})
foreach(doc watchdog forensics gdb-scripts analyzer/verdict analyzer/slowdown)
  string(REPLACE "/" "-" doc_name ${doc})
  install(FILES ${PROJECT_SOURCE_DIR}/${doc}/README.md DESTINATION ${CMAKE_INSTALL_DOCDIR} RENAME ${doc_name}.md)
endforeach()

# The relative paths between the installed parts, compiled into the parts that look.
file(RELATIVE_PATH lib_to_bin ${CMAKE_INSTALL_FULL_LIBDIR} ${CMAKE_INSTALL_FULL_BINDIR})
file(RELATIVE_PATH bin_to_scripts ${CMAKE_INSTALL_FULL_BINDIR}
     ${CMAKE_INSTALL_PREFIX}/${hangwatch_datadir}/gdb-scripts)
target_compile_definitions(hangwatch_watchdog PRIVATE HANGWATCH_LIB_TO_BIN="${lib_to_bin}")
target_compile_definitions(forensics_collector PRIVATE HANGWATCH_BIN_TO_GDB_SCRIPTS="${bin_to_scripts}")

set(CPACK_GENERATOR DEB)
set(CPACK_PACKAGE_NAME hangwatch)
set(CPACK_PACKAGE_VERSION 0.1.0)
set(CPACK_PACKAGE_VENDOR hangwatch)
set(CPACK_PACKAGE_CONTACT "hangwatch maintainers <hangwatch@localhost>")
set(CPACK_PACKAGE_DESCRIPTION_SUMMARY "Hang forensics for distributed GPU training (LD_PRELOAD watchdog and collector)")
set(CPACK_PACKAGING_INSTALL_PREFIX /usr)
set(CPACK_DEBIAN_FILE_NAME DEB-DEFAULT)
set(CPACK_DEBIAN_PACKAGE_SECTION devel)
# Shared libraries from dpkg-shlibdeps; gdb because the collector reads ring progress
# with it (cuda-gdb on GPU nodes comes with the CUDA toolkit, not from Debian).
set(CPACK_DEBIAN_PACKAGE_SHLIBDEPS ON)
set(CPACK_DEBIAN_PACKAGE_DEPENDS "gdb")
set(CPACK_DEBIAN_PACKAGE_SUGGESTS "prometheus-node-exporter")
include(CPack)

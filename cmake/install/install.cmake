# `cmake --install`: libibp.so, the `ibp` tool, the public headers, the host
# codec as a shared library (libibp_codec.so) with its CMake package
# (find_package(ibp) -> ibp::codec) and pkg-config file (ibp.pc).
# Included from the top-level CMakeLists.txt after every target exists.
# docs/USING.md, "Installing", is the user's side of it.
include(GNUInstallDirs)
include(CMakePackageConfigHelpers)

set(IBP_INSTALL_CMAKEDIR ${CMAKE_INSTALL_LIBDIR}/cmake/ibp CACHE STRING
  "Where the CMake package of the codec goes, relative to the prefix")
set(ibp_install_dir ${CMAKE_CURRENT_LIST_DIR})

# The shared codec: the static library's (position-independent) objects,
# whole, exporting only the public names (codec.map).
add_library(ibp_codec_shared SHARED ${ibp_install_dir}/codec_so.c)
target_link_libraries(ibp_codec_shared
  PRIVATE $<LINK_LIBRARY:WHOLE_ARCHIVE,ibp_codec>
  INTERFACE Threads::Threads)
target_link_options(ibp_codec_shared PRIVATE
  -Wl,--version-script=${ibp_install_dir}/codec.map)
# clang's sanitizer runtimes are linked into executables only: a shared
# library under them has undefined sanitizer symbols by design (as
# preload/CMakeLists.txt does for libibp.so)
if(NOT (IBP_SANITIZE AND CMAKE_C_COMPILER_ID MATCHES "Clang"))
  target_link_options(ibp_codec_shared PRIVATE -Wl,--no-undefined)
endif()
target_include_directories(ibp_codec_shared INTERFACE
  $<BUILD_INTERFACE:${PROJECT_SOURCE_DIR}/include>
  $<INSTALL_INTERFACE:${CMAKE_INSTALL_INCLUDEDIR}>)
set_target_properties(ibp_codec_shared PROPERTIES
  OUTPUT_NAME ibp_codec
  EXPORT_NAME codec
  VERSION ${PROJECT_VERSION}
  SOVERSION ${PROJECT_VERSION_MAJOR}
  LINK_DEPENDS ${ibp_install_dir}/codec.map)
add_library(ibp::codec ALIAS ibp_codec_shared)

install(TARGETS ibp_codec_shared EXPORT ibpTargets
  LIBRARY DESTINATION ${CMAKE_INSTALL_LIBDIR})
install(FILES ${PROJECT_SOURCE_DIR}/include/ibp/codec.h
              ${PROJECT_SOURCE_DIR}/include/ibp/container.h
              ${PROJECT_SOURCE_DIR}/include/ibp/chunk_widths.h
  DESTINATION ${CMAKE_INSTALL_INCLUDEDIR}/ibp)
install(EXPORT ibpTargets NAMESPACE ibp:: DESTINATION ${IBP_INSTALL_CMAKEDIR})
configure_package_config_file(${ibp_install_dir}/ibpConfig.cmake.in
  ${CMAKE_CURRENT_BINARY_DIR}/ibpConfig.cmake
  INSTALL_DESTINATION ${IBP_INSTALL_CMAKEDIR}
  PATH_VARS CMAKE_INSTALL_INCLUDEDIR CMAKE_INSTALL_LIBDIR)
write_basic_package_version_file(${CMAKE_CURRENT_BINARY_DIR}/ibpConfigVersion.cmake
  COMPATIBILITY SameMinorVersion)
install(FILES ${CMAKE_CURRENT_BINARY_DIR}/ibpConfig.cmake
              ${CMAKE_CURRENT_BINARY_DIR}/ibpConfigVersion.cmake
  DESTINATION ${IBP_INSTALL_CMAKEDIR})

# ibp.pc finds its prefix from its own place (${pcfiledir}), so the tree
# works wherever `cmake --install --prefix` puts it.
file(RELATIVE_PATH IBP_PC_TO_PREFIX
  /prefix/${CMAKE_INSTALL_LIBDIR}/pkgconfig /prefix)
configure_file(${ibp_install_dir}/ibp.pc.in ${CMAKE_CURRENT_BINARY_DIR}/ibp.pc @ONLY)
install(FILES ${CMAKE_CURRENT_BINARY_DIR}/ibp.pc
  DESTINATION ${CMAKE_INSTALL_LIBDIR}/pkgconfig)

# The tool and the interposer.  `ibp run` finds the installed libibp.so
# beside it (tools/cmd_run.c: IBP_INSTALL_PRELOAD_REL).
install(TARGETS ibp RUNTIME DESTINATION ${CMAKE_INSTALL_BINDIR})
file(RELATIVE_PATH IBP_BIN_TO_LIB /prefix/${CMAKE_INSTALL_BINDIR}
  /prefix/${CMAKE_INSTALL_LIBDIR})
target_compile_definitions(ibp PRIVATE
  IBP_INSTALL_PRELOAD_REL="${IBP_BIN_TO_LIB}/libibp.so")
if(TARGET ibp_preload)
  install(TARGETS ibp_preload LIBRARY DESTINATION ${CMAKE_INSTALL_LIBDIR})
endif()

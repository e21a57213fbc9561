# The libraries and headers libibp builds with, found at configure time;
# a missing one is named with the Debian package that has it (the build
# group of scripts/deps.sh: `bash scripts/deps.sh build` installs them).  Defines the imported target ibp::xxhash
# (libxxhash: the container checksum, docs/FORMAT.md §7).
set(ibp_missing_deps)

# ibp_require_header(<var> <header> <package>)
macro(ibp_require_header var header package)
  find_path(${var} ${header})
  if(NOT ${var})
    list(APPEND ibp_missing_deps "${header} (Debian package ${package})")
    list(APPEND ibp_missing_packages ${package})
  endif()
endmacro()

# ibp_require_library(<var> <name> <package>)
macro(ibp_require_library var name package)
  find_library(${var} ${name})
  if(NOT ${var})
    list(APPEND ibp_missing_deps "lib${name} (Debian package ${package})")
    list(APPEND ibp_missing_packages ${package})
  endif()
endmacro()

ibp_require_header(IBP_UTHASH_INCLUDE_DIR uthash.h uthash-dev)       # preload/
ibp_require_header(IBP_XXHASH_INCLUDE_DIR xxhash.h libxxhash-dev)    # codec/
ibp_require_library(IBP_XXHASH_LIBRARY xxhash libxxhash-dev)         # codec/
# tests/sim/driver/tests (test_simcuda_decls) includes the toolkit's
# cudaEGL.h and cudaGL.h, which include EGL/egl.h and GL/gl.h.
if(BUILD_TESTING)
  find_path(IBP_CUDA_EGL_INCLUDE_DIR cudaEGL.h
    HINTS ENV CUDA_HOME ENV CUDA_PATH /usr/local/cuda PATH_SUFFIXES include)
  if(IBP_CUDA_EGL_INCLUDE_DIR)
    ibp_require_header(IBP_EGL_INCLUDE_DIR EGL/egl.h libegl-dev)
    ibp_require_header(IBP_GL_INCLUDE_DIR GL/gl.h libegl-dev)
  endif()
endif()

if(ibp_missing_deps)
  list(REMOVE_DUPLICATES ibp_missing_packages)
  list(JOIN ibp_missing_deps "\n  " missing_lines)
  list(JOIN ibp_missing_packages " " missing_pkgs)
  message(FATAL_ERROR "libibp cannot be built: not found:\n  ${missing_lines}\n"
    "Install them: sudo apt-get install ${missing_pkgs}\n"
    "(or: bash scripts/deps.sh build, which installs what a fresh machine "
    "needs); elsewhere, point CMAKE_PREFIX_PATH at them.")
endif()

add_library(ibp::xxhash UNKNOWN IMPORTED)
set_target_properties(ibp::xxhash PROPERTIES
  IMPORTED_LOCATION ${IBP_XXHASH_LIBRARY}
  INTERFACE_INCLUDE_DIRECTORIES ${IBP_XXHASH_INCLUDE_DIR})

# Checks that libibp's JSON report (IBP_STATS) shows written regions kept
# or demoted (e2e_rewritten.c; docs/ARCHITECTURE.md, "No stale byte"):
#
#   cmake -DSTATS=<file> -DREGIONS=name1+,name2- -P check_rewritten.cmake
#
# A name ending in "+" must be ready (not demoted), with tensors
# recompressed and at most a 16th of its tensors dirty at exit (those stored
# raw stay dirty: e2e_fill makes 2 % of them random, in new places); one ending
# in "-" must be degraded (demoted to pass-through).
cmake_minimum_required(VERSION 3.25)
include(${CMAKE_CURRENT_LIST_DIR}/regions_named.cmake)

if(NOT STATS OR NOT EXISTS "${STATS}")
  message(FATAL_ERROR "check_rewritten: libibp wrote no report to '${STATS}'")
endif()
file(READ "${STATS}" json)
string(REPLACE "," ";" names "${REGIONS}")
foreach(want IN LISTS names)
  string(REGEX MATCH "[+-]$" kept "${want}")
  string(REGEX REPLACE "[+-]$" "" want "${want}")
  if(NOT kept)
    message(FATAL_ERROR "check_rewritten: '${want}' ends in neither + nor -")
  endif()
  e2e_regions_named("${json}" "${want}" found)
  foreach(i IN LISTS found)
    foreach(key state tensors_recompressed dirty_tensors tensors)
      string(JSON ${key} GET "${json}" regions ${i} ${key})
    endforeach()
    set(recompressed ${tensors_recompressed})
    set(dirty ${dirty_tensors})
    math(EXPR dirty16 "${dirty} * 16")
    if(kept STREQUAL "+" AND (NOT state STREQUAL "ready" OR
                              NOT recompressed GREATER 0 OR
                              dirty16 GREATER tensors))
      message(FATAL_ERROR "check_rewritten: region '${want}' is ${state}, "
        "${recompressed} tensors recompressed, ${dirty} of ${tensors} "
        "dirty (want ready, some recompressed, at most a 16th dirty)")
    endif()
    if(kept STREQUAL "-" AND NOT state STREQUAL "degraded")
      message(FATAL_ERROR "check_rewritten: region '${want}' is ${state} "
        "(want degraded: rewritten faster than copied)")
    endif()
    message(STATUS "check_rewritten: region '${want}': ${state}, "
      "${recompressed} recompressed, ${dirty} of ${tensors} dirty")
  endforeach()
  if(found STREQUAL "")
    message(FATAL_ERROR "check_rewritten: region '${want}' is not in the report")
  endif()
endforeach()

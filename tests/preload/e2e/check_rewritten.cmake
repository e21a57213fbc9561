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

if(NOT STATS OR NOT EXISTS "${STATS}")
  message(FATAL_ERROR "check_rewritten: libibp wrote no report to '${STATS}'")
endif()
file(READ "${STATS}" json)
string(JSON count LENGTH "${json}" regions)
string(REPLACE "," ";" names "${REGIONS}")
foreach(want IN LISTS names)
  string(REGEX MATCH "[+-]$" kept "${want}")
  string(REGEX REPLACE "[+-]$" "" want "${want}")
  if(NOT kept)
    message(FATAL_ERROR "check_rewritten: '${want}' ends in neither + nor -")
  endif()
  set(found FALSE)
  if(count GREATER 0)
    math(EXPR last "${count} - 1")
    foreach(i RANGE ${last})
      string(JSON name GET "${json}" regions ${i} name)
      if(NOT name STREQUAL want)
        continue()
      endif()
      set(found TRUE)
      string(JSON state GET "${json}" regions ${i} state)
      string(JSON recompressed GET "${json}" regions ${i} tensors_recompressed)
      string(JSON dirty GET "${json}" regions ${i} dirty_tensors)
      string(JSON tensors GET "${json}" regions ${i} tensors)
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
  endif()
  if(NOT found)
    message(FATAL_ERROR "check_rewritten: region '${want}' is not in the report")
  endif()
endforeach()

# Checks the report after e2e_quiet (docs/ARCHITECTURE.md, "Quiet
# regions"): region "quiet" was held by the userfaultfd tracker, went
# faulting (mode_switches > 0) and caught writes by faults (sync_faults >
# 0) -- or, with -DREGIONS=scanning, never moved and scanned for copies.
#
#   cmake -DSTATS=<file> -DREGIONS=quiet|scanning -P check_quiet.cmake
cmake_minimum_required(VERSION 3.25)
include(${CMAKE_CURRENT_LIST_DIR}/regions_named.cmake)

file(READ "${STATS}" json)
e2e_regions_named("${json}" quiet found)
foreach(i IN LISTS found)
  foreach(key tracker mode scan_calls sync_faults mode_switches)
    string(JSON ${key} GET "${json}" regions ${i} ${key})
  endforeach()
  string(CONCAT seen "tracker ${tracker}, mode at exit ${mode}, "
    "scan_calls ${scan_calls}, sync_faults ${sync_faults}, "
    "mode_switches ${mode_switches}")
  if(NOT tracker STREQUAL "userfaultfd")
    message(FATAL_ERROR "check_quiet: region 'quiet': ${seen}")
  endif()
  if(REGIONS STREQUAL "scanning")
    if(NOT mode_switches EQUAL 0 OR NOT scan_calls GREATER 0)
      message(FATAL_ERROR "check_quiet: region 'quiet' (never quiet): ${seen}")
    endif()
  elseif(NOT mode_switches GREATER 0 OR NOT sync_faults GREATER 0)
    message(FATAL_ERROR "check_quiet: region 'quiet': ${seen}")
  endif()
  message(STATUS "check_quiet: region 'quiet': ${seen}")
  return()
endforeach()
message(FATAL_ERROR "check_quiet: no region 'quiet' in ${STATS}")

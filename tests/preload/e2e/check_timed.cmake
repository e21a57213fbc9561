# Checks the report after e2e_wait_clock: region REGIONS had a copy whose
# timed span the gate believed (its routes' "timed" add up to at least one;
# docs/CONFIG.md, "Statistics: IBP_STATS").  A span that overlapped
# libibp's own uploads is dropped, not counted.
#
#   cmake -DSTATS=<file> -DREGIONS=<name> -P check_timed.cmake
cmake_minimum_required(VERSION 3.25)

file(READ "${STATS}" json)
string(JSON count LENGTH "${json}" regions)
math(EXPR last "${count} - 1")
foreach(i RANGE ${last})
  string(JSON name GET "${json}" regions ${i} name)
  if(NOT name STREQUAL REGIONS)
    continue()
  endif()
  set(timed 0)
  foreach(route driver zerocopy staged batched)
    string(JSON n GET "${json}" regions ${i} routes ${route} timed)
    math(EXPR timed "${timed} + ${n}")
  endforeach()
  if(NOT timed GREATER 0)
    message(FATAL_ERROR "check_timed: region '${REGIONS}': no timed span "
      "believed (a span after the wait for its set-up was dropped)")
  endif()
  message(STATUS "check_timed: region '${REGIONS}': ${timed} timed")
  return()
endforeach()
message(FATAL_ERROR "check_timed: no region '${REGIONS}' in ${STATS}")

# Checks that libibp's JSON report (IBP_STATS) shows staged copies
# (docs/ARCHITECTURE.md, "Staged copies"):
#
#   cmake -DSTATS=<file> [-DREGIONS=name1,name2] -P check_staged.cmake
#
# The totals' copies_staged must be > 0 (a run under IBP_PATH=staged that
# passes because nothing was staged fails here), and so must every region
# named in REGIONS, its entries together ("-" is no name).
cmake_minimum_required(VERSION 3.25)
include(${CMAKE_CURRENT_LIST_DIR}/regions_named.cmake)

if(NOT STATS OR NOT EXISTS "${STATS}")
  message(FATAL_ERROR "check_staged: libibp wrote no report to '${STATS}'")
endif()
file(READ "${STATS}" json)
string(JSON staged ERROR_VARIABLE err GET "${json}" totals copies_staged)
if(err)
  message(FATAL_ERROR "check_staged: ${STATS}: no totals.copies_staged (${err})")
endif()
string(JSON served GET "${json}" totals copies_served)
if(NOT staged GREATER 0)
  message(FATAL_ERROR "check_staged: ${STATS}: copies_staged ${staged} of "
    "${served} served: nothing was staged (want > 0)")
endif()
string(REPLACE "," ";" REGIONS "${REGIONS}")
list(REMOVE_ITEM REGIONS "-")
foreach(want IN LISTS REGIONS)
  set(n 0)
  e2e_regions_named("${json}" "${want}" found)
  foreach(i IN LISTS found)
    string(JSON k GET "${json}" regions ${i} copies_staged)
    math(EXPR n "${n} + ${k}")
  endforeach()
  if(NOT n GREATER 0)
    message(FATAL_ERROR "check_staged: ${STATS}: region '${want}' had no "
      "copy staged (copies_staged 0)")
  endif()
endforeach()
message(STATUS "check_staged: ${staged} of ${served} served copies staged")

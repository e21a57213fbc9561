# Checks whether libibp's JSON report (IBP_STATS) shows compact regions
# (docs/ARCHITECTURE.md, "Compact regions"):
#
#   cmake -DSTATS=<file> -DREGIONS=yes|no -P check_compact.cmake
#
# yes: some region was held by the compact tracker and pages were released
# (a compact run that passes because nothing was compact fails here); no:
# no region was compact and nothing was released (a compact rule that
# could not be kept gave ordinary regions).
cmake_minimum_required(VERSION 3.25)

if(NOT STATS OR NOT EXISTS "${STATS}")
  message(FATAL_ERROR "check_compact: libibp wrote no report to '${STATS}'")
endif()
file(READ "${STATS}" json)
string(JSON released ERROR_VARIABLE err GET "${json}" totals pages_released)
if(err)
  message(FATAL_ERROR "check_compact: ${STATS}: no totals.pages_released (${err})")
endif()
string(JSON count LENGTH "${json}" regions)
set(compact 0)
if(count GREATER 0)
  math(EXPR last "${count} - 1")
  foreach(i RANGE ${last})
    string(JSON tracker GET "${json}" regions ${i} tracker)
    if(tracker STREQUAL "compact")
      math(EXPR compact "${compact} + 1")
    endif()
  endforeach()
endif()
if(REGIONS STREQUAL "yes")
  if(NOT compact GREATER 0 OR NOT released GREATER 0)
    message(FATAL_ERROR "check_compact: ${STATS}: ${compact} compact "
      "regions, ${released} pages released (want both > 0)")
  endif()
elseif(REGIONS STREQUAL "no")
  if(compact GREATER 0 OR released GREATER 0)
    message(FATAL_ERROR "check_compact: ${STATS}: ${compact} compact "
      "regions, ${released} pages released (want none)")
  endif()
else()
  message(FATAL_ERROR "check_compact: REGIONS must be yes or no")
endif()

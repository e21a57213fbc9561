# Checks the JSON report libibp wrote at exit (IBP_STATS=<file>;
# docs/CONFIG.md, "Statistics: IBP_STATS") after an end-to-end program:
#
#   cmake -DSTATS=<file> -DREGIONS=name1,name2 -P check_stats.cmake
#
# The report must be JSON with "version": 1, a "regions" array and a
# "totals" object; for every name in REGIONS the regions of that name
# (a name may appear several times: freed and re-made regions are kept)
# must together have served copies (copies_served > 0) and saved space
# (saved_fraction > 0 in at least one of them), and none may have fallen
# back to the real copy (copies_fallback == 0: no error was injected).
# A name ending in "+" (e.g. stale+) must also show written tensors
# recompressed (tensors_recompressed > 0 in its entries together).  When
# the environment forces a tracker (IBP_TRACKER=mprotect or userfaultfd),
# every entry that was tracked must name it ("tracker").  "decoder" names
# the running decoder's build and the devices set up (at least one): each
# device's decode_measured must say whether its profile's decoder_build is
# that build, and a built-in profile (IBP_PROFILE=a100-pcie4|h100-pcie5)
# has its decode terms unmeasured (docs/PROFILE.md).
cmake_minimum_required(VERSION 3.25)
include(${CMAKE_CURRENT_LIST_DIR}/regions_named.cmake)

if(NOT STATS)
  message(FATAL_ERROR "check_stats: no -DSTATS=<file> (is IBP_STATS set?)")
endif()
if(NOT EXISTS "${STATS}")
  message(FATAL_ERROR "check_stats: libibp wrote no report to ${STATS}")
endif()
file(READ "${STATS}" json)

string(JSON version ERROR_VARIABLE err GET "${json}" version)
if(err OR NOT version EQUAL 1)
  message(FATAL_ERROR "check_stats: ${STATS}: no \"version\": 1 (${err})")
endif()
string(JSON totals ERROR_VARIABLE err TYPE "${json}" totals)
if(err OR NOT totals STREQUAL "OBJECT")
  message(FATAL_ERROR "check_stats: ${STATS}: no \"totals\" object (${err})")
endif()
string(JSON count ERROR_VARIABLE err LENGTH "${json}" regions)
if(err)
  message(FATAL_ERROR "check_stats: ${STATS}: no \"regions\" array (${err})")
endif()

string(JSON build ERROR_VARIABLE err GET "${json}" decoder build)
string(JSON devices ERROR_VARIABLE err2 LENGTH "${json}" decoder devices)
if(err OR err2 OR build STREQUAL "" OR NOT devices GREATER 0)
  message(FATAL_ERROR "check_stats: ${STATS}: no \"decoder\" with a build "
    "and devices (${err}${err2})")
endif()
math(EXPR last "${devices} - 1")
foreach(i RANGE ${last})
  string(JSON of GET "${json}" decoder devices ${i} decoder_build)
  string(JSON measured GET "${json}" decoder devices ${i} decode_measured)
  string(JSON profile GET "${json}" decoder devices ${i} profile)
  set(same OFF)
  if(of STREQUAL build)
    set(same ON)
  endif()
  if(NOT same STREQUAL measured)
    message(FATAL_ERROR "check_stats: device entry ${i} (${profile}): "
      "decode_measured ${measured}, its decoder_build ${of}, this decoder "
      "${build}")
  endif()
  if("$ENV{IBP_PROFILE}" MATCHES "^(a100-pcie4|h100-pcie5)$" AND
     (measured OR NOT of STREQUAL "word-pdep"))
    message(FATAL_ERROR "check_stats: built-in ${profile}: decoder_build "
      "${of}, decode_measured ${measured} (want word-pdep, OFF)")
  endif()
endforeach()

string(REPLACE "," ";" REGIONS "${REGIONS}")
set(failed FALSE)
foreach(want IN LISTS REGIONS)
  set(need_again FALSE)
  if(want MATCHES "\\+$")
    set(need_again TRUE)
    string(REGEX REPLACE "\\+$" "" want "${want}")
  endif()
  set(again 0)
  set(served 0)
  set(saved FALSE)
  set(fallback 0)
  e2e_regions_named("${json}" "${want}" entries)
  list(LENGTH entries found)
  foreach(i IN LISTS entries)
    string(JSON tracker GET "${json}" regions ${i} tracker)
    if(("$ENV{IBP_TRACKER}" STREQUAL "mprotect" OR
        "$ENV{IBP_TRACKER}" STREQUAL "userfaultfd") AND
       NOT tracker STREQUAL "none" AND
       NOT tracker STREQUAL "$ENV{IBP_TRACKER}")
      message(SEND_ERROR "check_stats: region '${want}' was tracked by "
        "${tracker}, IBP_TRACKER=$ENV{IBP_TRACKER}")
      set(failed TRUE)
    endif()
    string(JSON n GET "${json}" regions ${i} copies_served)
    string(JSON fraction GET "${json}" regions ${i} saved_fraction)
    math(EXPR served "${served} + ${n}")
    string(JSON n GET "${json}" regions ${i} copies_fallback)
    math(EXPR fallback "${fallback} + ${n}")
    string(JSON n GET "${json}" regions ${i} tensors_recompressed)
    math(EXPR again "${again} + ${n}")
    if(fraction GREATER 0)
      set(saved TRUE)
    endif()
  endforeach()
  if(found EQUAL 0)
    message(SEND_ERROR "check_stats: region '${want}' is not in the report")
    set(failed TRUE)
  elseif(NOT served GREATER 0 OR NOT saved OR NOT fallback EQUAL 0)
    message(SEND_ERROR "check_stats: region '${want}' (${found} entries): "
      "copies_served ${served} (want > 0), saved_fraction > 0: ${saved}, "
      "copies_fallback ${fallback} (want 0)")
    set(failed TRUE)
  elseif(need_again AND NOT again GREATER 0)
    message(SEND_ERROR "check_stats: region '${want}': no written tensor "
      "was recompressed (tensors_recompressed 0)")
    set(failed TRUE)
  else()
    message(STATUS "check_stats: region '${want}': ${found} entries, "
      "${served} copies served, space saved, ${again} recompressed")
  endif()
endforeach()
if(failed)
  message(FATAL_ERROR "check_stats: ${STATS} does not show the regions served")
endif()

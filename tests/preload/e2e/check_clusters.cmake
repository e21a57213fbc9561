# Checks that libibp's JSON report (IBP_STATS) shows regions stored with
# several Mask/Bitval pairs (docs/FORMAT.md §4, clusters=auto):
#
#   cmake -DSTATS=<file> -DREGIONS=[batched:]name1,name2 -P check_clusters.cmake
#
# Every region named must have "clusters" > 1 in each of its entries; a
# name ending in "+" must also have its written tensors recompressed, at
# most a 32nd of its tensors left dirty at exit (e2e_clusters rewrites an
# eighth of them with values their old cluster cannot store: recompressed
# with the old cluster, about that eighth stays dirty; with the cluster
# that stores each best, only the raw tensors that share a page with a
# written one).
# With the prefix "batched:", the totals' copies_batched must be > 0.
cmake_minimum_required(VERSION 3.25)
include(${CMAKE_CURRENT_LIST_DIR}/regions_named.cmake)

if(NOT STATS OR NOT EXISTS "${STATS}")
  message(FATAL_ERROR "check_clusters: libibp wrote no report to '${STATS}'")
endif()
file(READ "${STATS}" json)
set(names "${REGIONS}")
if(names MATCHES "^batched:")
  string(REGEX REPLACE "^batched:" "" names "${names}")
  string(JSON batched GET "${json}" totals copies_batched)
  if(NOT batched GREATER 0)
    message(FATAL_ERROR "check_clusters: ${STATS}: copies_batched 0 (want > 0)")
  endif()
endif()
string(REPLACE "," ";" names "${names}")
foreach(want IN LISTS names)
  set(again FALSE)
  if(want MATCHES "\\+$")
    set(again TRUE)
    string(REGEX REPLACE "\\+$" "" want "${want}")
  endif()
  e2e_regions_named("${json}" "${want}" found)
  foreach(i IN LISTS found)
    string(JSON k GET "${json}" regions ${i} clusters)
    string(JSON recompressed GET "${json}" regions ${i} tensors_recompressed)
    string(JSON dirty GET "${json}" regions ${i} dirty_tensors)
    string(JSON tensors GET "${json}" regions ${i} tensors)
    math(EXPR dirty32 "${dirty} * 32")
    if(NOT k GREATER 1)
      message(FATAL_ERROR "check_clusters: region '${want}' has ${k} "
        "cluster(s) (want > 1)")
    endif()
    if(again AND (NOT recompressed GREATER 0 OR dirty32 GREATER tensors))
      message(FATAL_ERROR "check_clusters: region '${want}': "
        "${recompressed} tensors recompressed (want > 0), ${dirty} of "
        "${tensors} still dirty (want at most a 32nd)")
    endif()
    message(STATUS "check_clusters: region '${want}': ${k} clusters, "
      "${recompressed} recompressed, ${dirty} dirty")
  endforeach()
  if(found STREQUAL "")
    message(FATAL_ERROR "check_clusters: region '${want}' is not in the report")
  endif()
endforeach()

# Checks that libibp's JSON report (IBP_STATS) shows batched launches, or
# none (docs/ARCHITECTURE.md, "Batched launches"):
#
#   cmake -DSTATS=<file> -DBATCHED=1|0 [-DMIN_PER_LAUNCH=N] [-DMIN_BATCHED=N]
#         -P check_batch.cmake
#
# BATCHED=1: the totals' copies_batched and batch_launches are both > 0
# (a run that should batch and silently did not fails here), and with
# MIN_PER_LAUNCH, copies_batched at least N times batch_launches (batches
# as large as the case's steps allow), with MIN_BATCHED at least N copies
# batched; BATCHED=0 (IBP_BATCH=0): both are
# 0.
cmake_minimum_required(VERSION 3.25)

if(NOT STATS OR NOT EXISTS "${STATS}")
  message(FATAL_ERROR "check_batch: libibp wrote no report to '${STATS}'")
endif()
file(READ "${STATS}" json)
string(JSON copies ERROR_VARIABLE err GET "${json}" totals copies_batched)
if(err)
  message(FATAL_ERROR "check_batch: ${STATS}: no totals.copies_batched (${err})")
endif()
string(JSON launches ERROR_VARIABLE err GET "${json}" totals batch_launches)
if(err)
  message(FATAL_ERROR "check_batch: ${STATS}: no totals.batch_launches (${err})")
endif()
if(BATCHED)
  if(NOT copies GREATER 0 OR NOT launches GREATER 0)
    message(FATAL_ERROR "check_batch: ${STATS}: copies_batched ${copies}, "
      "batch_launches ${launches}: nothing was batched (want both > 0)")
  endif()
  if(MIN_BATCHED AND copies LESS MIN_BATCHED)
    message(FATAL_ERROR "check_batch: ${STATS}: copies_batched ${copies}: "
      "fewer than ${MIN_BATCHED}")
  endif()
  if(MIN_PER_LAUNCH)
    math(EXPR least "${launches} * ${MIN_PER_LAUNCH}")
    if(copies LESS least)
      message(FATAL_ERROR "check_batch: ${STATS}: copies_batched ${copies} "
        "in ${launches} batched launches: fewer than ${MIN_PER_LAUNCH} a "
        "launch")
    endif()
  endif()
elseif(NOT copies EQUAL 0 OR NOT launches EQUAL 0)
  message(FATAL_ERROR "check_batch: ${STATS}: copies_batched ${copies}, "
    "batch_launches ${launches} with batching off (want 0)")
endif()
message(STATUS "check_batch: ${copies} copies in ${launches} batched launches")

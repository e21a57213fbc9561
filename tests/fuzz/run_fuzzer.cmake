# Runs one libFuzzer binary for a while on a scratch copy of its seed corpus
# (the checked-in corpus is never modified).
#   cmake -DFUZZER=<exe> -DCORPUS=<dir> -DWORK=<dir> -DSECONDS=30 -P run_fuzzer.cmake
# New inputs found stay in WORK; crashes are written there as crash-*.
file(REMOVE_RECURSE "${WORK}")
file(MAKE_DIRECTORY "${WORK}/corpus")
file(COPY "${CORPUS}/" DESTINATION "${WORK}/corpus")
execute_process(
  COMMAND "${FUZZER}" -max_total_time=${SECONDS} -print_final_stats=1
          "-artifact_prefix=${WORK}/" "${WORK}/corpus"
  RESULT_VARIABLE rc)
if(NOT rc EQUAL 0)
  message(FATAL_ERROR "${FUZZER} failed (${rc}); artifacts in ${WORK}")
endif()

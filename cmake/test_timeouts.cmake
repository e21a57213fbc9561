# Test timeouts that hold on a loaded machine (tests/README.md,
# "Timeouts"), and the sanitizer builds' reduced work (IBP_TEST_REDUCE,
# below).  Every TIMEOUT a CMakeLists.txt gives a test is the time the
# test may take on an idle machine, and is multiplied here by
# IBP_TEST_TIMEOUT_SCALE, a whole number: the cache variable when set
# (-DIBP_TEST_TIMEOUT_SCALE=N), else the environment variable of the same
# name at configure time, else 2 (release) or 4 (sanitizers, fuzz: ASan
# runs the same tests two to three times slower).  A test without a
# TIMEOUT gets CTest's default, 1500 s, scaled.
#
# A directory that adds tests calls ibp_scale_test_timeouts() once,
# anywhere: its timeouts are scaled when the directory is done (a deferred
# call), so set_tests_properties after the call count too.  The top-level
# CMakeLists.txt checks at its end that no directory with tests was left
# out (ibp_check_test_timeouts_scaled).
set(IBP_TEST_TIMEOUT_SCALE "" CACHE STRING
  "Multiply every test's timeout by this whole number (empty: 2, or 4 under the sanitizers)")
if(NOT "${IBP_TEST_TIMEOUT_SCALE}" STREQUAL "")
  set(ibp_timeout_scale "${IBP_TEST_TIMEOUT_SCALE}")
elseif(DEFINED ENV{IBP_TEST_TIMEOUT_SCALE} AND
       NOT "$ENV{IBP_TEST_TIMEOUT_SCALE}" STREQUAL "")
  set(ibp_timeout_scale "$ENV{IBP_TEST_TIMEOUT_SCALE}")
elseif(IBP_SANITIZE OR IBP_FUZZ)
  set(ibp_timeout_scale 4)
else()
  set(ibp_timeout_scale 2)
endif()
if(NOT ibp_timeout_scale MATCHES "^[1-9][0-9]*$")
  message(FATAL_ERROR "IBP_TEST_TIMEOUT_SCALE must be a whole number >= 1 "
    "(got '${ibp_timeout_scale}')")
endif()
message(STATUS "Test timeouts: x${ibp_timeout_scale} (IBP_TEST_TIMEOUT_SCALE)")

# IBP_TEST_REDUCE (tests/README.md, "Under the sanitizers"): the one knob
# by which a build runs less randomized work per test -- randomized tests
# the first 1/N of their default cases, e2e programs fewer copies, fault
# injection every kind of point once.  Set in every test's environment by
# the same deferred pass as the timeouts: the cache variable when set, else
# 8 under the sanitizers (whose point is memory and UB errors on every code
# path, not statistics: the release build runs everything in full), else 1.
set(IBP_TEST_REDUCE "" CACHE STRING
  "Run 1/N of the randomized tests' work (empty: 8 under the sanitizers, else 1)")
if(NOT "${IBP_TEST_REDUCE}" STREQUAL "")
  set(ibp_test_reduce "${IBP_TEST_REDUCE}")
elseif(IBP_SANITIZE)
  set(ibp_test_reduce 8)
else()
  set(ibp_test_reduce 1)
endif()
if(NOT ibp_test_reduce MATCHES "^[1-9][0-9]*$")
  message(FATAL_ERROR "IBP_TEST_REDUCE must be a whole number >= 1 "
    "(got '${ibp_test_reduce}')")
endif()
if(ibp_test_reduce GREATER 1)
  message(STATUS "Randomized test work: 1/${ibp_test_reduce} (IBP_TEST_REDUCE)")
endif()

function(_ibp_scale_test_timeouts_now)
  get_property(tests DIRECTORY PROPERTY TESTS)
  foreach(test IN LISTS tests)
    if(ibp_test_reduce GREATER 1)
      set_property(TEST ${test} APPEND PROPERTY ENVIRONMENT
        "IBP_TEST_REDUCE=${ibp_test_reduce}")
    endif()
    get_test_property(${test} TIMEOUT seconds)
    if(NOT seconds)
      set(seconds 1500) # CTest's default
    endif()
    math(EXPR seconds "${seconds} * ${ibp_timeout_scale}")
    set_tests_properties(${test} PROPERTIES TIMEOUT ${seconds})
  endforeach()
endfunction()

# ibp_scale_test_timeouts(): scale the timeouts of this directory's tests
# when it is done (once, however often it is called).
function(ibp_scale_test_timeouts)
  get_property(done DIRECTORY PROPERTY IBP_TIMEOUTS_SCALED)
  if(NOT done)
    set_property(DIRECTORY PROPERTY IBP_TIMEOUTS_SCALED ON)
    cmake_language(DEFER CALL _ibp_scale_test_timeouts_now)
  endif()
endfunction()

# Every directory under dir (itself included) that has tests has called
# ibp_scale_test_timeouts(): a list of those that have not in out_var.
function(_ibp_unscaled_dirs dir out_var)
  set(out)
  get_property(tests DIRECTORY ${dir} PROPERTY TESTS)
  get_property(done DIRECTORY ${dir} PROPERTY IBP_TIMEOUTS_SCALED)
  if(tests AND NOT done)
    list(APPEND out ${dir})
  endif()
  get_property(subdirs DIRECTORY ${dir} PROPERTY SUBDIRECTORIES)
  foreach(sub IN LISTS subdirs)
    _ibp_unscaled_dirs(${sub} sub_out)
    list(APPEND out ${sub_out})
  endforeach()
  set(${out_var} ${out} PARENT_SCOPE)
endfunction()

# Called at the end of the top-level CMakeLists.txt (deferred: after the
# tests registered there by deferred calls).
function(ibp_check_test_timeouts_scaled)
  _ibp_unscaled_dirs(${PROJECT_SOURCE_DIR} unscaled)
  if(unscaled)
    list(JOIN unscaled "\n  " lines)
    message(FATAL_ERROR "tests whose timeouts are not scaled (add "
      "ibp_scale_test_timeouts() to their CMakeLists.txt; "
      "cmake/test_timeouts.cmake):\n  ${lines}")
  endif()
endfunction()

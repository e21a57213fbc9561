# Test: the kernels' fatbin is a fatbin (magic 0xBA55ED50), and the ptxas
# report has every kernel for every architecture with no spill, no stack
# frame and at most IBP_KERNEL_MAX_REGISTERS registers.  Run as: cmake -DFATBIN=... -DREPORT=... -P check_fatbin.cmake
file(READ ${FATBIN} magic LIMIT 4 HEX)
if(NOT magic STREQUAL "50ed55ba")
  message(FATAL_ERROR "${FATBIN}: not a fatbin (magic ${magic})")
endif()
file(READ ${REPORT} report)
foreach(arch 75 80 86 89 90 100 120)
  foreach(kernel ibp_decompress ibp_decompress_batch ibp_gather ibp_stage_exp)
    string(FIND "${report}" "entry function '${kernel}' for 'sm_${arch}'" at)
    if(at EQUAL -1)
      message(FATAL_ERROR "no ${kernel} for sm_${arch} in ${REPORT}")
    endif()
  endforeach()
endforeach()
string(REGEX MATCHALL "[1-9][0-9]* bytes (spill stores|spill loads|stack frame)" bad "${report}")
if(bad)
  message(FATAL_ERROR "spills or local memory in the kernels: ${bad}")
endif()
include(${CMAKE_CURRENT_LIST_DIR}/kernel_registers.cmake)
ibp_kernel_registers_check("${report}" "${REPORT}")
message(STATUS "fatbin OK: 7 architectures, 0 spills, 0 stack, "
               "<= ${IBP_KERNEL_MAX_REGISTERS} registers")

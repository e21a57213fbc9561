# Builds the kernels' fatbin with nvcc, writes the ptxas -v report and fails
# on any register spill or stack frame, or a kernel of more than
# IBP_KERNEL_MAX_REGISTERS registers (docs/ARCHITECTURE.md "The decode
# plan": no register bound in the source, where ptxas would spill).  Run as: cmake -DNVCC=... -DSRC=... -DOUT=...
#   -DREPORT=... -DINCLUDES="a;b" -P nvcc_fatbin.cmake
set(arch
  -gencode arch=compute_75,code=sm_75
  -gencode arch=compute_80,code=sm_80
  -gencode arch=compute_86,code=sm_86
  -gencode arch=compute_89,code=sm_89
  "-gencode=arch=compute_90,code=[sm_90,compute_90]"
  -gencode arch=compute_100,code=sm_100
  -gencode arch=compute_120,code=sm_120)
set(inc)
foreach(d IN LISTS INCLUDES)
  list(APPEND inc -I${d})
endforeach()
execute_process(
  COMMAND ${NVCC} -fatbin -O3 -std=c++17 -Xptxas -v ${arch} ${inc} -o ${OUT} ${SRC}
  RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE err)
file(WRITE ${REPORT} "${out}${err}")
if(NOT rc EQUAL 0)
  message(FATAL_ERROR "nvcc failed (see ${REPORT}):\n${err}")
endif()
string(REGEX MATCHALL "[1-9][0-9]* bytes (spill stores|spill loads|stack frame)"
       spills "${err}")
if(spills)
  message(FATAL_ERROR "register spills in the kernels (see ${REPORT}): ${spills}")
endif()
include(${CMAKE_CURRENT_LIST_DIR}/kernel_registers.cmake)
ibp_kernel_registers_check("${err}" "${REPORT}")

# Builds the kernels' fatbin with nvcc, writes the ptxas -v report and fails
# on any register spill or stack frame, or a kernel of more than
# IBP_KERNEL_MAX_REGISTERS registers (docs/ARCHITECTURE.md "The decode
# plan": no register bound in the source, where ptxas would spill).  Run as: cmake -DNVCC=... -DSRC=... -DOUT=...
#   -DREPORT=... -DINCLUDES="a;b" [-DFROM=<build dir>] -P nvcc_fatbin.cmake
# (FROM: copy that build's fatbin and report instead of running nvcc).
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
if(FROM)
  # -DFROM=<build dir> (IBP_FATBIN_FROM): its fatbin and report, when they
  # are newer than every kernel source (a fatbin of older sources would be
  # a silent mismatch); the checks below run on the copy.
  set(from_fatbin ${FROM}/kernels/ibp_kernels.fatbin)
  set(from_report ${FROM}/kernels/ptxas.txt)
  file(GLOB sources ${INCLUDES}/*.cu ${INCLUDES}/*.h)
  foreach(f IN LISTS sources)
    if(NOT EXISTS ${from_fatbin} OR NOT EXISTS ${from_report} OR
       ${f} IS_NEWER_THAN ${from_fatbin})
      message(FATAL_ERROR "IBP_FATBIN_FROM=${FROM}: ${from_fatbin} is "
        "missing or older than ${f}; build ${FROM} first")
    endif()
  endforeach()
  file(COPY_FILE ${from_fatbin} ${OUT})
  file(READ ${from_report} err)
  file(WRITE ${REPORT} "${err}")
else()
  execute_process(
    COMMAND ${NVCC} -fatbin -O3 -std=c++17 -Xptxas -v ${arch} ${inc} -o ${OUT} ${SRC}
    RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE err)
  file(WRITE ${REPORT} "${out}${err}")
  if(NOT rc EQUAL 0)
    message(FATAL_ERROR "nvcc failed (see ${REPORT}):\n${err}")
  endif()
endif()
string(REGEX MATCHALL "[1-9][0-9]* bytes (spill stores|spill loads|stack frame)"
       spills "${err}")
if(spills)
  message(FATAL_ERROR "register spills in the kernels (see ${REPORT}): ${spills}")
endif()
include(${CMAKE_CURRENT_LIST_DIR}/kernel_registers.cmake)
ibp_kernel_registers_check("${err}" "${REPORT}")

# The register budget of libibp's kernels: 64 per thread (32 warps per SM;
# docs/ARCHITECTURE.md "The decode plan").  ibp_kernel_registers_check(
# <ptxas -v output> <report path>) fails when a kernel of any architecture
# uses more.
set(IBP_KERNEL_MAX_REGISTERS 64)
function(ibp_kernel_registers_check text report)
  string(REGEX MATCHALL "Used [0-9]+ registers" used "${text}")
  if(NOT used)
    message(FATAL_ERROR "no register counts in ${report}")
  endif()
  foreach(u IN LISTS used)
    string(REGEX MATCH "[0-9]+" n "${u}")
    if(n GREATER IBP_KERNEL_MAX_REGISTERS)
      message(FATAL_ERROR "a kernel uses ${n} registers, more than "
                          "${IBP_KERNEL_MAX_REGISTERS} (see ${report})")
    endif()
  endforeach()
endfunction()

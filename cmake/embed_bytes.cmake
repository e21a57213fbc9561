# Writes a C file defining `const unsigned char NAME[]` (16-byte aligned)
# and `const size_t NAME_size` with the bytes of IN.  Run as:
#   cmake -DIN=... -DOUT=... -DNAME=... -P embed_bytes.cmake
# The bytes are not spelled out as C: the file's top-level asm has the
# assembler read IN (.incbin), which takes milliseconds where compiling a
# 3.5 MB array literal took ~10 s of CPU, and its hex another ~6 s here.
# Rerun whenever IN changes (the build's custom command depends on it):
# the compiler's dependency scan does not see an .incbin.
if(NOT IN OR NOT OUT OR NOT NAME)
  message(FATAL_ERROR "embed_bytes.cmake: give -DIN= -DOUT= -DNAME=")
endif()
get_filename_component(in "${IN}" ABSOLUTE)
if(NOT EXISTS "${in}")
  message(FATAL_ERROR "embed_bytes.cmake: no file ${in}")
endif()
if(in MATCHES "[\"\\\\\n]")
  message(FATAL_ERROR "embed_bytes.cmake: a path with a quote, backslash or "
    "newline cannot be named to the assembler: ${in}")
endif()
file(SIZE "${in}" size)
file(WRITE ${OUT} "/* Generated from ${in}: do not edit. */
#include <stddef.h>

/* ${size} bytes, read by the assembler */
__asm__(\".section .rodata\\n\"
        \".balign 16\\n\"
        \".globl ${NAME}\\n\"
        \".type ${NAME}, @object\\n\"
        \"${NAME}:\\n\"
        \".incbin \\\"${in}\\\"\\n\"
        \".size ${NAME}, . - ${NAME}\\n\"
        \".previous\\n\");
const size_t ${NAME}_size = ${size};
")

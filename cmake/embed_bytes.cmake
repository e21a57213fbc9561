# Writes a C file defining `const unsigned char NAME[]` and `NAME_size`
# with the bytes of IN.  Run as: cmake -DIN=... -DOUT=... -DNAME=... -P
file(READ ${IN} hex HEX)
string(LENGTH "${hex}" n)
math(EXPR size "${n} / 2")
string(REGEX REPLACE "([0-9a-f][0-9a-f])" "0x\\1," body "${hex}")
string(REGEX REPLACE "(0x..,0x..,0x..,0x..,0x..,0x..,0x..,0x..,0x..,0x..,0x..,0x..,)" "\\1\n" body "${body}")
file(WRITE ${OUT} "/* Generated from ${IN}: do not edit. */\n#include <stddef.h>\n"
  "__attribute__((aligned(16))) const unsigned char ${NAME}[] = {\n${body}\n};\n"
  "const size_t ${NAME}_size = ${size};\n")

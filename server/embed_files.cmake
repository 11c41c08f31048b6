# Turn files into a C table of {path, text, len}:
#   cmake -DBASE=dir -DFILES="a.md;docs/b.md" -DOUT=file.c -DNAME=symbol -P embed_files.cmake
# Each file's path is kept as given, relative to BASE (the pages map it to a URL).
set(decls "")
set(rows "")
set(i 0)
foreach(f IN LISTS FILES)
  file(READ "${BASE}/${f}" hex HEX)
  string(LENGTH "${hex}" n)
  math(EXPR n "${n} / 2")
  string(REGEX REPLACE "([0-9a-f][0-9a-f])" "0x\\1," body "${hex}")
  string(REGEX REPLACE "(0x..,0x..,0x..,0x..,0x..,0x..,0x..,0x..,0x..,0x..,0x..,0x..,0x..,0x..,0x..,0x..,)" "\\1\n" body "${body}")
  string(APPEND decls "static const char ${NAME}_${i}[] = {\n${body}0x00\n};\n")
  string(APPEND rows "\t{ \"${f}\", ${NAME}_${i}, ${n} },\n")
  math(EXPR i "${i} + 1")
endforeach()
file(WRITE "${OUT}" "/* Generated from ${BASE}: ${FILES}; do not edit. */\n#include \"web/internal.h\"\n\n${decls}\nconst struct aas_embedded_file ${NAME}[] = {\n${rows}};\nconst size_t ${NAME}_count = ${i};\n")

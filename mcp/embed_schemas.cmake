# The MCP tools' JSON Schemas into a C table, one entry per file of DIR:
#   cmake -DDIR=mcp/schemas -DOUT=file.c -P embed_schemas.cmake
# Each file's text becomes a NUL-terminated array, named by its base name
# (create_sandbox.json -> "create_sandbox"); see mcp_internal.h.
file(GLOB files RELATIVE "${DIR}" "${DIR}/*.json")
list(SORT files)
set(arrays "")
set(table "")
set(i 0)
foreach(f ${files})
  file(READ "${DIR}/${f}" hex HEX)
  string(REGEX REPLACE "([0-9a-f][0-9a-f])" "0x\\1," body "${hex}")
  string(REGEX REPLACE "((0x..,){16})" "\\1\n" body "${body}")
  string(REGEX REPLACE "\\.json$" "" name "${f}")
  string(APPEND arrays "static const char file${i}[] = {\n${body}0x00\n};\n")
  string(APPEND table "\t{ \"${name}\", file${i} },\n")
  math(EXPR i "${i} + 1")
endforeach()
file(WRITE "${OUT}" "/* Generated from the JSON files of ${DIR} by embed_schemas.cmake; do not edit. */\n#include \"mcp_internal.h\"\n\n${arrays}\nconst struct aas_mcp_schema_file aas_mcp_schema_files[] = {\n${table}\t{ NULL, NULL }\n};\n")

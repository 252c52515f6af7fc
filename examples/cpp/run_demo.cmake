# CTest driver (cmake -P): runs the example engine's demo in a fresh directory under $TMPDIR
# (or /tmp) and checks its exit status and output. Input: ENGINE (the executable).
# (Not in the build tree: a project inside a git work tree is snapshotted by git's rules.)
cmake_minimum_required(VERSION 3.16)
if(DEFINED ENV{TMPDIR} AND NOT "$ENV{TMPDIR}" STREQUAL "")
  set(tmp "$ENV{TMPDIR}")
else()
  set(tmp "/tmp")
endif()
string(RANDOM LENGTH 12 tag)
set(work "${tmp}/patchbox-engine-demo-${tag}")
execute_process(COMMAND "${ENGINE}" --demo "${work}"
  RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE err)
file(REMOVE_RECURSE "${work}")
message("${out}${err}")
if(NOT rc EQUAL 0)
  message(FATAL_ERROR "the engine exited ${rc}")
endif()
foreach(expected
    "docs-fix: tool exited 0\n  touched: README.md\n  accepted"
    "refactor: tool exited 0\n  touched: src/generated.c src/main.c\n  rejected; left pending at "
    "/pending/refactor.patch\n")
  string(FIND "${out}" "${expected}" at)
  if(at EQUAL -1)
    message(FATAL_ERROR "missing from the output: ${expected}")
  endif()
endforeach()

# CTest driver (cmake -P): runs the example plan executor's demo in a fresh directory under
# $TMPDIR (or /tmp) and checks its exit status and output. Input: PLAN (the executable).
cmake_minimum_required(VERSION 3.16)
if(DEFINED ENV{TMPDIR} AND NOT "$ENV{TMPDIR}" STREQUAL "")
  set(tmp "$ENV{TMPDIR}")
else()
  set(tmp "/tmp")
endif()
string(RANDOM LENGTH 12 tag)
set(work "${tmp}/patchbox-plan-demo-${tag}")
execute_process(COMMAND "${PLAN}" --demo "${work}"
  RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE err)
file(REMOVE_RECURSE "${work}")
message("${out}${err}")
if(NOT rc EQUAL 0)
  message(FATAL_ERROR "the plan executor exited ${rc}")
endif()
foreach(expected
    "project untouched: yes\n"
    "app: modified src/main.c\n"
    "+int main(void) { return 0; }\n"
    "docs: added CHANGELOG.md\n"
    "commit_all: 2 sandboxes committed\n"
    "project now: app/src/main.c = int main(void) { return 0; }\n"
    "docs/CHANGELOG.md exists: yes\n"
    "plan release-1 cleaned up\n")
  string(FIND "${out}" "${expected}" at)
  if(at EQUAL -1)
    message(FATAL_ERROR "missing from the output: ${expected}")
  endif()
endforeach()

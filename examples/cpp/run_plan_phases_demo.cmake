# CTest driver (cmake -P): runs the phases example (plan_phases.cpp) in a fresh directory under
# $TMPDIR (or /tmp) and checks its exit status and output. Input: PLAN (the executable).
cmake_minimum_required(VERSION 3.16)
if(DEFINED ENV{TMPDIR} AND NOT "$ENV{TMPDIR}" STREQUAL "")
  set(tmp "$ENV{TMPDIR}")
else()
  set(tmp "/tmp")
endif()
string(RANDOM LENGTH 12 tag)
set(work "${tmp}/patchbox-plan-phases-demo-${tag}")
execute_process(COMMAND "${PLAN}" --demo "${work}"
  RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE err)
file(REMOVE_RECURSE "${work}")
message("${out}${err}")
if(NOT rc EQUAL 0)
  message(FATAL_ERROR "the phases example exited ${rc}")
endif()
foreach(expected
    "execute #1 wrote: notes=1 repo=1 db=1\n"
    "execute #1 failed (execute): the model produced an invalid step\n"
    "rolled back to pre_execute: 3 sandboxes, 0 failures\n"
    "after rollback: notes=0 repo=0 db=0\n"
    "execute #2 succeeded: notes=1 repo=1 db=2\n"
    "originals untouched: yes\n"
    "apply: 3 sandboxes committed\n"
    "notes/release.txt: release 2 notes\n"
    "feature.txt in HEAD: yes\n"
    "db tasks: 2\n"
    "plan release-2 cleaned up\n")
  string(FIND "${out}" "${expected}" at)
  if(at EQUAL -1)
    message(FATAL_ERROR "missing from the output: ${expected}")
  endif()
endforeach()

# Run after cargo builds libpatchbox.a without its bundled SQLite (PATCHBOX_SYSTEM_SQLITE):
# cmake -DLIB=<libpatchbox.a> -DSQLITE=<libsqlite3.so> -DNM=<nm> -DOBJCOPY=<objcopy> -P this.
#
# rusqlite's bindings describe a newer SQLite than many systems ship (Debian 12: 3.40.1), and
# the archive holds all of rusqlite, including functions patchbox never calls that reference
# newer SQLite functions (sqlite3_set_clientdata, sqlite3_is_interrupted, ...). A linker
# reports those references although nothing reaches them. Each sqlite3_* reference the
# system library does not define is made weak: it stays unresolved (null) there and binds to
# the real function where a newer SQLite has it. patchbox's own SQLite calls are all in the
# system library (the Python extension, linked by rustc, proves it on every test run: its
# import would fail on an undefined symbol).
foreach(_v LIB SQLITE NM OBJCOPY)
  if(NOT ${_v})
    message(FATAL_ERROR "weaken_sqlite.cmake: ${_v} is not set")
  endif()
endforeach()
execute_process(COMMAND "${NM}" -u --format=just-symbols "${LIB}"
  OUTPUT_VARIABLE _undefined RESULT_VARIABLE _rc ERROR_QUIET)
if(NOT _rc EQUAL 0)
  message(FATAL_ERROR "weaken_sqlite.cmake: ${NM} -u ${LIB} failed")
endif()
execute_process(COMMAND "${NM}" -D --defined-only --format=just-symbols "${SQLITE}"
  OUTPUT_VARIABLE _defined RESULT_VARIABLE _rc)
if(NOT _rc EQUAL 0)
  message(FATAL_ERROR "weaken_sqlite.cmake: ${NM} -D ${SQLITE} failed")
endif()
string(REGEX MATCHALL "sqlite3[a-z_0-9]*" _undefined "${_undefined}")
string(REGEX MATCHALL "sqlite3[a-z_0-9]*" _defined "${_defined}")
list(REMOVE_DUPLICATES _undefined)
foreach(_s ${_defined})
  list(REMOVE_ITEM _undefined "${_s}")
endforeach()
if(NOT _undefined)
  return()
endif()
# The session extension is what patchbox needs from SQLite: a library without it is refused.
foreach(_s ${_undefined})
  if(_s MATCHES "^sqlite3(session|changeset)_")
    message(FATAL_ERROR "patchbox: ${SQLITE} lacks SQLite's session extension (${_s}); "
                        "build without PATCHBOX_SYSTEM_SQLITE, or use a SQLite built with "
                        "SQLITE_ENABLE_SESSION and SQLITE_ENABLE_PREUPDATE_HOOK")
  endif()
endforeach()
set(_args "")
foreach(_s ${_undefined})
  list(APPEND _args "--weaken-symbol=${_s}")
endforeach()
execute_process(COMMAND "${OBJCOPY}" ${_args} "${LIB}" RESULT_VARIABLE _rc)
if(NOT _rc EQUAL 0)
  message(FATAL_ERROR "weaken_sqlite.cmake: ${OBJCOPY} failed on ${LIB}")
endif()

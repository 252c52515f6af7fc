# CTest driver (cmake -P): builds the consumer project in tests/cpp/consumer against patchbox
#   MODE=install       installed into a temporary prefix (cmake --install), found with
#                      find_package(patchbox)
#   MODE=subdirectory  through add_subdirectory(<patchbox source>), reusing this build's cargo
#                      target dir so cargo has nothing to do
# then runs the consumer's two programs (patchbox::patchbox and patchbox::entropic_compat) in
# a fresh directory under $TMPDIR (or /tmp), with HOME there too. (Not in the build tree: a
# project inside a git work tree is snapshotted by git's rules, and build/ is ignored.) Inputs: PATCHBOX_BINARY_DIR PATCHBOX_SOURCE_DIR
# CONSUMER_SOURCE_DIR GENERATOR CXX_COMPILER SANITIZE CARGO_TARGET_DIR CARGO CLI MODE WORK_DIR.
cmake_minimum_required(VERSION 3.16)

function(run what)
  execute_process(COMMAND ${ARGN} RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE err)
  if(NOT rc EQUAL 0)
    if(run_dir)
      file(REMOVE_RECURSE "${run_dir}")
    endif()
    message(FATAL_ERROR "${what} failed (${rc}):\n${out}\n${err}")
  endif()
  message(STATUS "${what}: ok")
  set(last_output "${out}" PARENT_SCOPE)
endfunction()

file(REMOVE_RECURSE "${WORK_DIR}")
if(DEFINED ENV{TMPDIR} AND NOT "$ENV{TMPDIR}" STREQUAL "")
  set(tmp "$ENV{TMPDIR}")
else()
  set(tmp "/tmp")
endif()
string(RANDOM LENGTH 12 tag)
set(run_dir "${tmp}/patchbox-consumer-${tag}")
file(MAKE_DIRECTORY "${run_dir}/home")
set(build "${WORK_DIR}/build")
set(configure_args
  -S "${CONSUMER_SOURCE_DIR}" -B "${build}" -G "${GENERATOR}"
  "-DCMAKE_CXX_COMPILER=${CXX_COMPILER}" -DCMAKE_BUILD_TYPE=Release)

if(MODE STREQUAL "install")
  set(prefix "${WORK_DIR}/prefix")
  # With PATCHBOX_CLI: the program, its completions and its man pages.
  set(CLI_FILES "")
  if(CLI)
    set(CLI_FILES
      bin/patchbox
      share/bash-completion/completions/patchbox
      share/zsh/site-functions/_patchbox
      share/fish/vendor_completions.d/patchbox.fish
      share/man/man1/patchbox.1
      share/man/man1/patchbox-pending-apply.1)
  endif()
  run("cmake --install" "${CMAKE_COMMAND}" --install "${PATCHBOX_BINARY_DIR}" --prefix "${prefix}")
  foreach(f
      include/patchbox/sandbox.hpp
      include/patchbox/plan.hpp
      include/patchbox/checkpoint.hpp
      include/patchbox/strategy_registry.hpp
      include/patchbox/strategy_adapter.hpp
      include/patchbox/fs_utils.hpp
      include/patchbox/compat/entropic/core/sandbox.h
      lib*/libpatchbox.a
      lib*/cmake/patchbox/patchboxConfig.cmake
      lib*/cmake/patchbox/patchboxConfigVersion.cmake
      lib*/pkgconfig/patchbox.pc
      share/patchbox/tsan.supp
      ${CLI_FILES})
    file(GLOB found "${prefix}/${f}")
    if(NOT found)
      message(FATAL_ERROR "not installed: ${f}")
    endif()
  endforeach()
  file(GLOB_RECURSE private_headers "${prefix}/include/*bridge.h" "${prefix}/include/rust/*")
  if(private_headers)
    message(FATAL_ERROR "private headers installed: ${private_headers}")
  endif()
  # Without CMake: the consumer's main.cpp built with pkg-config's flags alone.
  find_program(PKG_CONFIG pkg-config)
  if(PKG_CONFIG AND NOT SANITIZE)
    file(GLOB pcdir "${prefix}/lib*/pkgconfig")
    set(ENV{PKG_CONFIG_PATH} "${pcdir}")
    execute_process(COMMAND "${PKG_CONFIG}" --cflags --libs --static patchbox
      OUTPUT_VARIABLE pc_flags OUTPUT_STRIP_TRAILING_WHITESPACE RESULT_VARIABLE rc)
    if(NOT rc EQUAL 0)
      message(FATAL_ERROR "pkg-config --cflags --libs patchbox failed")
    endif()
    separate_arguments(pc_flags UNIX_COMMAND "${pc_flags}")
    run("build with pkg-config" "${CXX_COMPILER}" "${CMAKE_CURRENT_LIST_DIR}/consumer/main.cpp"
      -o "${WORK_DIR}/pkgconfig-consumer" ${pc_flags})
    file(MAKE_DIRECTORY "${run_dir}/pkgconfig")
    run("run the pkg-config consumer" "${WORK_DIR}/pkgconfig-consumer" "${run_dir}/pkgconfig")
  endif()
  list(APPEND configure_args "-DCMAKE_PREFIX_PATH=${prefix}")
elseif(MODE STREQUAL "subdirectory")
  list(APPEND configure_args
    "-DCONSUMER_PATCHBOX_SOURCE_DIR=${PATCHBOX_SOURCE_DIR}"
    "-DPATCHBOX_CARGO_TARGET_DIR=${CARGO_TARGET_DIR}"
    "-DPATCHBOX_CARGO=${CARGO}"
    "-DPATCHBOX_SANITIZE=${SANITIZE}")
else()
  message(FATAL_ERROR "MODE must be install or subdirectory")
endif()

run("configure the consumer" "${CMAKE_COMMAND}" ${configure_args})
run("build the consumer" "${CMAKE_COMMAND}" --build "${build}")
run("consumer (patchbox::patchbox)" "${build}/consumer" "${run_dir}")
message(STATUS "${last_output}")
run("consumer (patchbox::entropic_compat)"
  "${CMAKE_COMMAND}" -E env "HOME=${run_dir}/home" --unset=PATCHBOX_ROOT
  "${build}/consumer_compat" "${run_dir}")
message(STATUS "${last_output}")

file(REMOVE_RECURSE "${WORK_DIR}" "${run_dir}")

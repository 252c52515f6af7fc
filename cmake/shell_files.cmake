# cmake -P script: writes the shell completions and man pages the `patchbox` program generates
# from its command definitions (`patchbox completions SHELL`, `patchbox man --out-dir DIR`).
# Inputs: PATCHBOX_CLI (the program), OUT_DIR.
cmake_minimum_required(VERSION 3.16)
file(MAKE_DIRECTORY "${OUT_DIR}/completions" "${OUT_DIR}/man1")
foreach(pair "bash;patchbox" "zsh;_patchbox" "fish;patchbox.fish")
  list(GET pair 0 shell)
  list(GET pair 1 name)
  execute_process(COMMAND "${PATCHBOX_CLI}" completions ${shell}
    OUTPUT_FILE "${OUT_DIR}/completions/${name}" RESULT_VARIABLE rc)
  if(NOT rc EQUAL 0)
    message(FATAL_ERROR "patchbox completions ${shell} failed (${rc})")
  endif()
endforeach()
execute_process(COMMAND "${PATCHBOX_CLI}" man --out-dir "${OUT_DIR}/man1" RESULT_VARIABLE rc)
if(NOT rc EQUAL 0)
  message(FATAL_ERROR "patchbox man failed (${rc})")
endif()

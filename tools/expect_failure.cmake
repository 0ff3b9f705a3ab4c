# Runs a command that must fail cleanly: exit code EXIT_CODE (default 1) and a message on stderr matching EXPECT.
#   cmake -DCOMMAND=<program|arg|arg...> -DEXPECT=<regex> [-DEXIT_CODE=2] -P expect_failure.cmake
# Arguments are separated by '|' (a CMake list cannot pass through add_test as one argument).
string(REPLACE "|" ";" command "${COMMAND}")
execute_process(COMMAND ${command} RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE err)
message(STATUS "exit code ${rc}\nstdout:\n${out}\nstderr:\n${err}")
if(NOT DEFINED EXIT_CODE)
  set(EXIT_CODE 1)
endif()
if(NOT rc STREQUAL EXIT_CODE)
  message(FATAL_ERROR "expected exit code ${EXIT_CODE}, got '${rc}'")
endif()
if(NOT err MATCHES "${EXPECT}")
  message(FATAL_ERROR "stderr does not match '${EXPECT}'")
endif()

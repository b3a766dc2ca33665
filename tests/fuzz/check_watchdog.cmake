# The per-input time limit catches a hang: an input that never ends is cut
# after --timeout-s, saved to the crash dir as timeout-*, and the run exits
# non-zero naming it. (The input hangs for good, so however loaded the
# machine, the only outcome is the watchdog's.)
cmake_minimum_required(VERSION 3.25)
file(REMOVE_RECURSE ${DIR})
file(MAKE_DIRECTORY ${DIR})
execute_process(COMMAND ${FUZZ} --hang-self-test --timeout-s 1 --crash-dir ${DIR}
                RESULT_VARIABLE rc ERROR_VARIABLE err TIMEOUT 300)
if(rc EQUAL 0 OR NOT rc MATCHES "^[0-9]+$")
  message(FATAL_ERROR "a hanging input did not end the run with a failure (result: ${rc})")
endif()
if(NOT err MATCHES "input 0 ran over the --timeout-s limit")
  message(FATAL_ERROR "the watchdog did not name the input: ${err}")
endif()
if(NOT EXISTS ${DIR}/timeout-watchdog-test-seed0-input0)
  message(FATAL_ERROR "the hanging input was not saved to the crash dir")
endif()

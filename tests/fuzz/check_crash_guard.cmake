# A crashing input is saved before the process dies: on a fatal signal, and
# in a sanitizer build on an ASan or UBSan report (GCC's UBSan runtime has a
# death hook of its own, which the guard must set too). KINDS: what to try.
cmake_minimum_required(VERSION 3.25)
string(REPLACE "," ";" KINDS "${KINDS}")
foreach(kind ${KINDS})
  file(REMOVE_RECURSE ${DIR}/${kind})
  file(MAKE_DIRECTORY ${DIR}/${kind})
  execute_process(COMMAND ${FUZZ} --crash-self-test ${kind} --crash-dir ${DIR}/${kind}
                  RESULT_VARIABLE rc ERROR_VARIABLE err TIMEOUT 300)
  if(rc EQUAL 0)
    message(FATAL_ERROR "${kind}: a crashing input did not fail the run")
  endif()
  if(NOT EXISTS ${DIR}/${kind}/crash-crash-test-seed0-input0)
    message(FATAL_ERROR "${kind}: the crashing input was not saved (result ${rc}): ${err}")
  endif()
  if(NOT err MATCHES "crashed on the input saved as")
    message(FATAL_ERROR "${kind}: the run did not name the saved input: ${err}")
  endif()
endforeach()

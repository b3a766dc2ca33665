# Scans engine/core sources for includes and names that would make the core
# depend on a clock, threads, I/O or an accelerator library.
file(GLOB sources ${CORE_DIR}/*.hpp ${CORE_DIR}/*.cpp)
set(forbidden
  "#include[ \t]*<(chrono|thread|mutex|future|fstream|iostream|cstdio|stdio.h|random|filesystem|ctime|time.h)>"
  "std::chrono::"
  "cblas"
  "cuda"
  "#include[ \t]*\"(sim|traces|metrics|models|hwprofiles|tools|engine/backend|engine/runtime)/")
set(violations "")
foreach(src ${sources})
  # Read whole lines ourselves: file(STRINGS) would split at semicolons and
  # throw the line numbers off.
  file(READ ${src} content)
  string(REPLACE "[" "<" content "${content}")
  string(REPLACE "]" ">" content "${content}")
  string(REPLACE ";" "," content "${content}")
  string(REPLACE "\n" ";" lines "${content}")
  set(n 0)
  foreach(line IN LISTS lines)
    math(EXPR n "${n} + 1")
    foreach(pattern ${forbidden})
      if(line MATCHES "${pattern}")
        string(APPEND violations "${src}:${n}: ${line}\n")
      endif()
    endforeach()
  endforeach()
endforeach()
if(violations)
  message(FATAL_ERROR "${CORE_DIR} must stay pure; found:\n${violations}")
endif()

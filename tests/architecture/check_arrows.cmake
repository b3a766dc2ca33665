# The architecture's arrows: each part may include only itself and the parts
# below it. base (errors, time, ids) is at the bottom and uses the standard
# library only; the serving core and the backends stand on base alone, and
# models and hardware profiles never point up into engine/. A line that
# breaks an arrow fails with its file and line.
cmake_policy(SET CMP0007 NEW)  # keep the empty "below" of base as an element
set(parts
  "base|"
  "engine/core|base"
  "engine/backend|base"
  "models|base"
  "hwprofiles|base models"
  "traces|base engine/core"
  "metrics|base engine/core"
  "sim|base engine/core models hwprofiles metrics traces"
  "engine/runtime|base engine/core engine/backend models metrics traces"
  "engine/profiler|base engine/core engine/backend engine/runtime models hwprofiles"
  "validate|base engine/core engine/backend engine/runtime models hwprofiles metrics traces sim"
  "planner|base engine/core models hwprofiles metrics traces sim"
  "serve|base engine/core engine/backend engine/runtime models hwprofiles metrics traces sim")
set(violations "")
foreach(entry ${parts})
  string(REPLACE "|" ";" fields "${entry}")
  list(GET fields 0 part)
  list(LENGTH fields n)
  set(allowed ${part})
  if(n GREATER 1)
    list(GET fields 1 below)
    string(REPLACE " " ";" below "${below}")
    list(APPEND allowed ${below})
  endif()
  file(GLOB_RECURSE sources ${ROOT}/${part}/*.hpp ${ROOT}/${part}/*.cpp ${ROOT}/${part}/*.cu ${ROOT}/${part}/*.cuh)
  foreach(src ${sources})
    file(STRINGS ${src} includes REGEX "^[ \t]*#[ \t]*include[ \t]*\"[^\"]*/")
    foreach(line ${includes})
      string(REGEX REPLACE "^[ \t]*#[ \t]*include[ \t]*\"([^\"]*)\".*$" "\\1" path "${line}")
      set(ok FALSE)
      foreach(prefix ${allowed})
        string(LENGTH "${prefix}/" len)
        string(SUBSTRING "${path}" 0 ${len} head)
        if(head STREQUAL "${prefix}/")
          set(ok TRUE)
        endif()
      endforeach()
      if(NOT ok)
        file(RELATIVE_PATH rel ${ROOT} ${src})
        string(APPEND violations "${rel}: ${part} includes ${path} (allowed: ${allowed})\n")
      endif()
    endforeach()
  endforeach()
endforeach()
if(violations)
  message(FATAL_ERROR "an include breaks the architecture's arrows:\n${violations}")
endif()

# What a user reads (README, docs/, the bundled models, hardware profiles,
# sample traces and plot scripts) names no file outside the repository: the
# project's ../shared folder is not on a user's machine (only tests read it).
# Usage: cmake -DROOT=<source dir> -P check_outside_refs.cmake
file(GLOB_RECURSE files
  ${ROOT}/README.md ${ROOT}/docs/*.md ${ROOT}/hwprofiles/profiles/*.json ${ROOT}/models/descriptors/*
  ${ROOT}/traces/samples/* ${ROOT}/tools/plot/*)
set(violations "")
foreach(f ${files})
  file(STRINGS ${f} hits REGEX "\\.\\./shared|shared/(reference|traces|gpu|DESIGN)")
  foreach(line ${hits})
    file(RELATIVE_PATH rel ${ROOT} ${f})
    string(SUBSTRING "${line}" 0 160 line)
    string(APPEND violations "${rel}: ${line}\n")
  endforeach()
endforeach()
if(violations)
  message(FATAL_ERROR "user-facing files name files outside the repository:\n${violations}")
endif()

# last_json(OUT COMMAND...): runs the command (a llama-decode with --json),
# fails the script with its output if it fails, and sets OUT to the last
# line it printed (the JSON object). Included by the decode_*.cmake scripts.
function(last_json out)
  execute_process(COMMAND ${ARGN} RESULT_VARIABLE rc OUTPUT_VARIABLE text ERROR_VARIABLE err)
  if(NOT rc EQUAL 0)
    message(FATAL_ERROR "${ARGN} failed (${rc}): ${err}${text}")
  endif()
  string(STRIP "${text}" text)
  string(REGEX REPLACE ".*\n" "" last "${text}")
  set(${out} "${last}" PARENT_SCOPE)
endfunction()

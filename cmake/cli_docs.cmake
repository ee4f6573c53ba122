# What `dptrain help` makes from the commands' tables and the option list
# (tools/cli_help.c), written by the build with `cmake -P`:
#   -DDPTRAIN=PATH -DMAN_DIR=DIR     the man pages dptrain.1 and
#                                    dptrain-COMMAND.1, one per command, into DIR
#   -DDPTRAIN=PATH -DMARKDOWN=FILE   the command line's reference, docs/cli.md
# A page that dptrain cannot make fails the build.
function(dp_help out)
  execute_process(COMMAND ${DPTRAIN} help ${ARGN} OUTPUT_FILE ${out} RESULT_VARIABLE rc
                  ERROR_VARIABLE err)
  if(NOT rc EQUAL 0)
    message(FATAL_ERROR "dptrain help ${ARGN}: exit ${rc}: ${err}")
  endif()
endfunction()

if(MAN_DIR)
  file(MAKE_DIRECTORY ${MAN_DIR})
  execute_process(COMMAND ${DPTRAIN} help --commands OUTPUT_VARIABLE commands
                  RESULT_VARIABLE rc OUTPUT_STRIP_TRAILING_WHITESPACE)
  if(NOT rc EQUAL 0 OR commands STREQUAL "")
    message(FATAL_ERROR "dptrain help --commands: exit ${rc}")
  endif()
  string(REPLACE "\n" ";" commands "${commands}")
  dp_help(${MAN_DIR}/dptrain.1 --man)
  foreach(command ${commands})
    dp_help(${MAN_DIR}/dptrain-${command}.1 --man ${command})
  endforeach()
endif()
if(MARKDOWN)
  dp_help(${MARKDOWN} --markdown)
endif()

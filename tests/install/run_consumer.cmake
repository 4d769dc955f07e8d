# Installs herd into a temporary prefix, then configures, builds and runs a consumer project
# against (1) the install tree and (2) the build tree, both through find_package(herd).
file(REMOVE_RECURSE ${WORK_DIR})
set(prefix ${WORK_DIR}/prefix)

function(run)
  execute_process(COMMAND ${ARGN} RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE err)
  if(NOT rc EQUAL 0)
    message(FATAL_ERROR "command failed (${rc}): ${ARGN}\n${out}\n${err}")
  endif()
  message(STATUS "${out}")
endfunction()

run(${CMAKE_COMMAND} --install ${HERD_BINARY_DIR} --prefix ${prefix})

foreach(kind install build)
  if(kind STREQUAL "install")
    set(locate -DCMAKE_PREFIX_PATH=${prefix})
  else()
    set(locate -Dherd_DIR=${HERD_BINARY_DIR})
  endif()
  set(bdir ${WORK_DIR}/consumer_${kind})
  run(${CMAKE_COMMAND} -S ${CONSUMER_SOURCE_DIR} -B ${bdir} -G ${CMAKE_GENERATOR}
      -DCMAKE_BUILD_TYPE=Release ${locate})
  run(${CMAKE_COMMAND} --build ${bdir})
  run(${bdir}/consumer)
endforeach()

# Consumer projects outside the herd tree, the way users build them (CTest script, cmake -P).
#   MODE=install     install herd (HERD_BINARY_DIR) into PREFIX: the fixture the others share.
#   MODE=cmake       configure, build and run the CMake project SOURCE_DIR against herd's
#                    install (PREFIX) and, with BUILD_TREE=ON, its build tree too.
#   MODE=makefile    build SOURCE_DIR/Makefile (C, Fortran and C++ programs) with make and
#                    pkg-config (PREFIX's herd.pc, FC the Fortran compiler), run them.
#   MODE=must_fail   configure SOURCE_DIR against PREFIX; its build must fail with EXPECT in
#                    the compiler's output.
#   MODE=subproject  configure SOURCE_DIR, which add_subdirectory()s HERD_SOURCE_DIR, with
#                    no build type; the project checks what herd added to it.
# Builds and runs happen in WORK_DIR. A build whose output mentions a warning (compiler or
# linker, e.g. DT_TEXTREL) fails the test, and so does a program with text relocations. A program's ./paramonte.in comes from SOURCE_DIR.

function(run out_var)
  execute_process(COMMAND ${ARGN} RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE err)
  if(NOT rc EQUAL 0)
    message(FATAL_ERROR "command failed (${rc}): ${ARGN}\n${out}\n${err}")
  endif()
  message(STATUS "${ARGN}\n${out}${err}")
  set(${out_var} "${out}${err}" PARENT_SCOPE)
endfunction()

function(check_no_warning what text)
  if(text MATCHES "[Ww]arning|TEXTREL")
    message(FATAL_ERROR "${what} printed a warning:\n${text}")
  endif()
endfunction()

# run_program(<dir> <program>): runs <dir>/<program> in <dir>.
function(run_program dir program)
  if(EXISTS ${SOURCE_DIR}/paramonte.in)
    file(COPY ${SOURCE_DIR}/paramonte.in DESTINATION ${dir})
  endif()
  # Text relocations (non-PIC code linked into a PIE) show in the dynamic section.
  execute_process(COMMAND readelf -d ${dir}/${program} OUTPUT_VARIABLE dynamic RESULT_VARIABLE rc)
  if(rc EQUAL 0 AND dynamic MATCHES "TEXTREL")
    message(FATAL_ERROR "${dir}/${program} has text relocations (DT_TEXTREL)")
  endif()
  execute_process(COMMAND ${dir}/${program} WORKING_DIRECTORY ${dir}
                  RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE err)
  message(STATUS "${program}: ${out}${err}")
  if(NOT rc EQUAL 0)
    message(FATAL_ERROR "${program} in ${dir} failed (${rc}):\n${out}${err}")
  endif()
endfunction()

if(MODE STREQUAL "install")
  file(REMOVE_RECURSE ${PREFIX})
  run(out ${CMAKE_COMMAND} --install ${HERD_BINARY_DIR} --prefix ${PREFIX})

elseif(MODE STREQUAL "cmake")
  set(kinds install)
  if(BUILD_TREE)
    list(APPEND kinds build)
  endif()
  foreach(kind IN LISTS kinds)
    if(kind STREQUAL "install")
      set(locate -DCMAKE_PREFIX_PATH=${PREFIX})
    else()
      set(locate -Dherd_DIR=${HERD_BINARY_DIR})
    endif()
    set(bdir ${WORK_DIR}/${kind})
    file(REMOVE_RECURSE ${bdir})
    run(out ${CMAKE_COMMAND} -S ${SOURCE_DIR} -B ${bdir} -G ${CMAKE_GENERATOR}
        -DCMAKE_BUILD_TYPE=Release ${locate})
    check_no_warning("configuring against the ${kind} tree" "${out}")
    run(out ${CMAKE_COMMAND} --build ${bdir})
    check_no_warning("building against the ${kind} tree" "${out}")
    run_program(${bdir} consumer)
  endforeach()

elseif(MODE STREQUAL "makefile")
  file(REMOVE_RECURSE ${WORK_DIR})
  file(MAKE_DIRECTORY ${WORK_DIR})
  set(env ${CMAKE_COMMAND} -E env PKG_CONFIG_PATH=${PREFIX}/${LIBDIR}/pkgconfig)
  run(libs ${env} pkg-config --libs herd)
  if(NOT libs MATCHES "^-L[^ ]+ -Wl,-rpath,[^ ]+ -lherd *\n?$")
    message(FATAL_ERROR "pkg-config --libs herd: expected -L, -rpath and -lherd only, got: ${libs}")
  endif()
  run(out ${env} make -C ${WORK_DIR} -f ${SOURCE_DIR}/Makefile FC=${FC}
      C_SRC=${SOURCE_DIR}/../c_driver F_SRC=${SOURCE_DIR}/../fortran_driver
      CXX_SRC=${SOURCE_DIR}/../consumer)
  check_no_warning("make" "${out}")
  file(COPY ${SOURCE_DIR}/../c_driver/paramonte.in DESTINATION ${WORK_DIR})
  run_program(${WORK_DIR} consumer)
  run_program(${WORK_DIR} consumer_fortran)
  run_program(${WORK_DIR} consumer_cxx)
  run_program(${WORK_DIR} consumer_io)

elseif(MODE STREQUAL "must_fail")
  set(bdir ${WORK_DIR})
  file(REMOVE_RECURSE ${bdir})
  run(out ${CMAKE_COMMAND} -S ${SOURCE_DIR} -B ${bdir} -G ${CMAKE_GENERATOR}
      -DCMAKE_BUILD_TYPE=Release -DCMAKE_PREFIX_PATH=${PREFIX})
  execute_process(COMMAND ${CMAKE_COMMAND} --build ${bdir}
                  RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE err)
  if(rc EQUAL 0)
    message(FATAL_ERROR "${SOURCE_DIR} built, but must not:\n${out}${err}")
  endif()
  if(NOT "${out}${err}" MATCHES "${EXPECT}")
    message(FATAL_ERROR "${SOURCE_DIR} failed to build, but without '${EXPECT}':\n${out}${err}")
  endif()
  message(STATUS "refused as expected:\n${out}${err}")

elseif(MODE STREQUAL "subproject")
  file(REMOVE_RECURSE ${WORK_DIR})
  run(out ${CMAKE_COMMAND} -S ${SOURCE_DIR} -B ${WORK_DIR} -G ${CMAKE_GENERATOR}
      -DHERD_SOURCE_DIR=${HERD_SOURCE_DIR} -DEXPECTED_BUILD_TYPE= -DHERD_ENABLE_CUDA=OFF)

else()
  message(FATAL_ERROR "consumer.cmake: unknown MODE '${MODE}'")
endif()

# Helpers shared by every herd module (DESIGN.md §2, §3, §5).

# Warnings for C++ targets; CUDA sources get host-compiler warnings through -Xcompiler.
function(herd_set_warnings target)
  target_compile_options(${target} PRIVATE
    $<$<COMPILE_LANGUAGE:CXX>:-Wall -Wextra>
    $<$<AND:$<COMPILE_LANGUAGE:CXX>,$<BOOL:${HERD_WARNINGS_AS_ERRORS}>>:-Werror>
    $<$<COMPILE_LANGUAGE:CUDA>:-Xcompiler=-Wall,-Wextra>)
endfunction()

# CUDA objects of a module: a separate static library, so that cxx_std_20 (which
# CMake 3.25 cannot map for CUDA 13) is never asked of nvcc; it gets -std=c++20 directly.
# The fat binary keeps its PTX uncompressed (--no-compress) so that the static device-code
# check (scripts/check_device_code.py, test device_code_static) can read the call graph;
# every such target is listed in the global property HERD_CUDA_OBJECT_TARGETS, which that
# test checks. NO_STATIC_CHECK leaves a target off the list (the checker's self-test inputs).
function(herd_add_cuda_objects target)
  cmake_parse_arguments(A "NO_STATIC_CHECK" "" "" ${ARGN})
  add_library(${target} STATIC ${A_UNPARSED_ARGUMENTS})
  set_target_properties(${target} PROPERTIES
    POSITION_INDEPENDENT_CODE ON
    CUDA_SEPARABLE_COMPILATION OFF
    EXPORT_NAME ${target})
  target_compile_options(${target} PRIVATE
    $<$<COMPILE_LANGUAGE:CUDA>:-std=c++20 --expt-relaxed-constexpr --no-compress>)
  herd_set_warnings(${target})
  if(NOT A_NO_STATIC_CHECK)
    set_property(GLOBAL APPEND PROPERTY HERD_CUDA_OBJECT_TARGETS ${target})
  endif()
endfunction()

# The host backend of the launch layer (herd/core/cuda/launch.hpp) for a module: its `.cu`
# files compiled as C++ with HERD_HOST_EMU (through one-line wrappers in <module>/cuda/host/,
# since a source file has one language per directory), as an OBJECT library. Only the
# host-emu test executables link it (herd_add_catch_test HOST_EMU), ahead of the CUDA
# libraries, whose symbols its objects replace.
function(herd_add_host_emu_objects target)
  add_library(${target} OBJECT ${ARGN})
  set_target_properties(${target} PROPERTIES POSITION_INDEPENDENT_CODE ON)
  target_compile_features(${target} PUBLIC cxx_std_20)
  target_compile_definitions(${target} PRIVATE HERD_HOST_EMU)
  herd_set_warnings(${target})
endfunction()

# herd_add_library(<module> SOURCES ... [PUBLIC ...] [PRIVATE ...])
# Creates target herd_<module>, alias herd::<module>, include root <module>/include,
# and adds it to herd::herd.
function(herd_add_library module)
  cmake_parse_arguments(A "" "" "SOURCES;PUBLIC;PRIVATE" ${ARGN})
  set(target herd_${module})
  add_library(${target} ${A_SOURCES})
  add_library(herd::${module} ALIAS ${target})
  set_target_properties(${target} PROPERTIES
    EXPORT_NAME ${module}
    OUTPUT_NAME herd_${module}
    POSITION_INDEPENDENT_CODE ON)
  target_compile_features(${target} PUBLIC cxx_std_20)
  target_include_directories(${target} PUBLIC
    $<BUILD_INTERFACE:${CMAKE_CURRENT_SOURCE_DIR}/include>
    $<INSTALL_INTERFACE:${CMAKE_INSTALL_INCLUDEDIR}>)
  target_link_libraries(${target} PUBLIC ${A_PUBLIC} PRIVATE ${A_PRIVATE})
  herd_set_warnings(${target})
  target_link_libraries(herd_all INTERFACE ${target})
  set_property(GLOBAL APPEND PROPERTY HERD_EXPORTED_TARGETS ${target})
  # The headers; a configure_file template (config.hpp.in) is not one.
  install(DIRECTORY include/ DESTINATION ${CMAKE_INSTALL_INCLUDEDIR} PATTERN "*.in" EXCLUDE)
endfunction()

# herd_add_catch_test(<name> SOURCES ... LIBS ... [MPI <n>...] [GPU] [ARGS ...]
#                     [LABELS ...] [TIMEOUT s])
# One Catch2 executable, registered with CTest:
#  - plain: one test running the executable with ARGS;
#  - MPI:   one test per rank count, through ${MPIEXEC_EXECUTABLE} -n <n>, label mpi;
#  - GPU:   label gpu, exit code 77 means "skipped: no CUDA device".
#  - GPU with HOST_EMU <object libraries>: also <name>_host_emu, the same test objects
#           linked with the host backend's objects (herd_add_host_emu_objects), label
#           host-emu instead of gpu, run with HOST_EMU_ARGS (Catch2 filters), never skipped.
#  - MPI and GPU: one test per rank count, labels mpi and gpu, exit code 77 means
#           "skipped: fewer CUDA devices than ranks" (tests/support/mpi_gpu_main.cpp).
function(herd_add_catch_test name)
  cmake_parse_arguments(A "GPU" "TIMEOUT" "SOURCES;LIBS;MPI;ARGS;LABELS;HOST_EMU;HOST_EMU_ARGS" ${ARGN})
  if(NOT A_TIMEOUT)
    set(A_TIMEOUT 600)
  endif()
  if(A_HOST_EMU)
    # The test sources compiled once, linked twice (CUDA runtime / host backend).
    add_library(${name}_objects OBJECT ${A_SOURCES})
    herd_set_warnings(${name}_objects)
    target_compile_features(${name}_objects PRIVATE cxx_std_20)
    target_link_libraries(${name}_objects PRIVATE ${A_LIBS} Catch2::Catch2)
    target_include_directories(${name}_objects PRIVATE ${PROJECT_SOURCE_DIR}/tests/support)
    add_executable(${name} $<TARGET_OBJECTS:${name}_objects>)
    add_executable(${name}_host_emu $<TARGET_OBJECTS:${name}_objects>)
    target_link_libraries(${name}_host_emu PRIVATE ${A_HOST_EMU} herd_test_host_emu_main ${A_LIBS} Catch2::Catch2)
    # Function names in HERD_HOST_EMU_TRACE_WAITS=1 call stacks.
    target_link_options(${name}_host_emu PRIVATE -rdynamic)
    add_test(NAME ${name}_host_emu COMMAND ${name}_host_emu ${A_HOST_EMU_ARGS})
    set_tests_properties(${name}_host_emu PROPERTIES LABELS "host-emu;${A_LABELS}" TIMEOUT ${A_TIMEOUT})
  else()
    add_executable(${name} ${A_SOURCES})
  endif()
  herd_set_warnings(${name})
  target_compile_features(${name} PRIVATE cxx_std_20)
  if(A_MPI AND A_GPU)
    target_link_libraries(${name} PRIVATE herd_test_mpi_gpu_main)
  elseif(A_MPI)
    target_link_libraries(${name} PRIVATE herd_test_mpi_main)
  elseif(A_GPU)
    target_link_libraries(${name} PRIVATE herd_test_gpu_main)
  else()
    target_link_libraries(${name} PRIVATE herd_test_main)
  endif()
  target_link_libraries(${name} PRIVATE ${A_LIBS} Catch2::Catch2)
  target_include_directories(${name} PRIVATE ${PROJECT_SOURCE_DIR}/tests/support)
  set(labels ${A_LABELS})
  if(A_MPI)
    foreach(n IN LISTS A_MPI)
      add_test(NAME ${name}_np${n}
        COMMAND ${MPIEXEC_EXECUTABLE} ${MPIEXEC_NUMPROC_FLAG} ${n} $<TARGET_FILE:${name}> ${A_ARGS})
      if(A_GPU)
        set_tests_properties(${name}_np${n} PROPERTIES
          PROCESSORS ${n} LABELS "mpi;gpu;${labels}" TIMEOUT ${A_TIMEOUT} SKIP_RETURN_CODE 77)
      else()
        set_tests_properties(${name}_np${n} PROPERTIES
          PROCESSORS ${n} LABELS "mpi;${labels}" TIMEOUT ${A_TIMEOUT})
      endif()
    endforeach()
  else()
    add_test(NAME ${name} COMMAND ${name} ${A_ARGS})
    if(A_GPU)
      list(APPEND labels gpu)
      set_tests_properties(${name} PROPERTIES SKIP_RETURN_CODE 77)
    endif()
    set_tests_properties(${name} PROPERTIES TIMEOUT ${A_TIMEOUT})
    if(labels)
      set_tests_properties(${name} PROPERTIES LABELS "${labels}")
    endif()
  endif()
endfunction()

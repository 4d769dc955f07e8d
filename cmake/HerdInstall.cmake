# Install rules and package configuration: find_package(herd) from an install or build tree.
include(CMakePackageConfigHelpers)

get_property(_herd_targets GLOBAL PROPERTY HERD_EXPORTED_TARGETS)
install(TARGETS ${_herd_targets} EXPORT herdTargets
  ARCHIVE DESTINATION ${CMAKE_INSTALL_LIBDIR}
  LIBRARY DESTINATION ${CMAKE_INSTALL_LIBDIR}
  RUNTIME DESTINATION ${CMAKE_INSTALL_BINDIR}
  INCLUDES DESTINATION ${CMAKE_INSTALL_INCLUDEDIR})

set(HERD_INSTALL_CMAKEDIR ${CMAKE_INSTALL_LIBDIR}/cmake/herd)
install(EXPORT herdTargets NAMESPACE herd:: DESTINATION ${HERD_INSTALL_CMAKEDIR})
export(EXPORT herdTargets NAMESPACE herd:: FILE ${PROJECT_BINARY_DIR}/herdTargets.cmake)

configure_package_config_file(cmake/herdConfig.cmake.in
  ${PROJECT_BINARY_DIR}/herdConfig.cmake
  INSTALL_DESTINATION ${HERD_INSTALL_CMAKEDIR})
write_basic_package_version_file(${PROJECT_BINARY_DIR}/herdConfigVersion.cmake
  VERSION ${PROJECT_VERSION} COMPATIBILITY SameMinorVersion)
configure_file(cmake/FindNCCL.cmake ${PROJECT_BINARY_DIR}/FindNCCL.cmake COPYONLY)
configure_file(cmake/FindFFTW3.cmake ${PROJECT_BINARY_DIR}/FindFFTW3.cmake COPYONLY)
install(FILES ${PROJECT_BINARY_DIR}/herdConfig.cmake ${PROJECT_BINARY_DIR}/herdConfigVersion.cmake
        cmake/FindNCCL.cmake cmake/FindFFTW3.cmake
  DESTINATION ${HERD_INSTALL_CMAKEDIR})

# --- libherd.so and herd.pc: herd for Makefile and pkg-config builds -------------------
# One shared library holding every herd library (whole archives: C, C++ and CUDA objects),
# linked against herd's dependencies, so that a C or Fortran driver links with `-lherd`
# alone: `cc driver.c $(pkg-config --cflags --libs herd)`. CMake users keep herd::herd (static).
# The option HERD_BUILD_SHARED_LIBRARY is declared in the top-level CMakeLists.txt.
if(HERD_BUILD_SHARED_LIBRARY)
  set(_herd_archives "")
  foreach(_t IN LISTS _herd_targets)
    get_target_property(_type ${_t} TYPE)
    if(_type STREQUAL "STATIC_LIBRARY" AND NOT _t STREQUAL "herd_fortran")
      list(APPEND _herd_archives ${_t})
    endif()
  endforeach()
  set(_herd_empty ${PROJECT_BINARY_DIR}/herd_shared_empty.cpp)
  file(CONFIGURE OUTPUT ${_herd_empty}
       CONTENT "// libherd.so's own translation unit: its code is the herd archives, whole.\n")
  add_library(herd_shared SHARED ${_herd_empty})
  # Every object of the archives (plain --whole-archive: CMake's WHOLE_ARCHIVE feature refuses
  # an archive that herd_all's usage requirements name again), then herd_all for the
  # dependencies, whose own mention of the archives pulls in nothing more.
  set(_herd_archive_files "")
  foreach(_t IN LISTS _herd_archives)
    list(APPEND _herd_archive_files "$<TARGET_FILE:${_t}>")
  endforeach()
  target_link_libraries(herd_shared PRIVATE
    -Wl,--whole-archive ${_herd_archive_files} -Wl,--no-whole-archive herd_all)
  target_link_options(herd_shared PRIVATE "LINKER:--no-undefined")
  set_target_properties(herd_shared PROPERTIES
    OUTPUT_NAME herd
    VERSION ${PROJECT_VERSION}
    SOVERSION ${PROJECT_VERSION_MAJOR}.${PROJECT_VERSION_MINOR}
    # Dependencies outside the system folders (CUDA's runtime) are found without LD_LIBRARY_PATH.
    INSTALL_RPATH_USE_LINK_PATH TRUE)
  install(TARGETS herd_shared LIBRARY DESTINATION ${CMAKE_INSTALL_LIBDIR})

  # herd.pc: a C or Fortran driver needs `-lherd` only. herd's C++ headers also include fmt,
  # spdlog, HDF5, Eigen and nlohmann-json: their include flags come through Requires.private;
  # C++ code that calls into fmt, spdlog or HDF5 itself links them by name
  # (`pkg-config --libs herd fmt spdlog hdf5`). Libs carry an rpath, since herd is usually
  # installed outside the linker's default folders.
  set(_herd_pc_requires_private "fmt spdlog hdf5 eigen3 nlohmann_json")
  file(RELATIVE_PATH _herd_pc_to_prefix "/p/${CMAKE_INSTALL_LIBDIR}/pkgconfig" "/p")
  configure_file(cmake/herd.pc.in ${PROJECT_BINARY_DIR}/herd.pc @ONLY)
  install(FILES ${PROJECT_BINARY_DIR}/herd.pc DESTINATION ${CMAKE_INSTALL_LIBDIR}/pkgconfig)
endif()

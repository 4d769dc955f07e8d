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
install(FILES ${PROJECT_BINARY_DIR}/herdConfig.cmake ${PROJECT_BINARY_DIR}/herdConfigVersion.cmake
        cmake/FindNCCL.cmake
  DESTINATION ${HERD_INSTALL_CMAKEDIR})

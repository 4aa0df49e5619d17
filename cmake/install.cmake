# install.cmake — cmake --install: libraries (libnabla.so, libnabla.a), header, pkg-config file and CMake package config (N6).
include(GNUInstallDirs)
include(CMakePackageConfigHelpers)

install(TARGETS nabla nabla_shared EXPORT nablaTargets
  ARCHIVE DESTINATION ${CMAKE_INSTALL_LIBDIR}
  LIBRARY DESTINATION ${CMAKE_INSTALL_LIBDIR}
  RUNTIME DESTINATION ${CMAKE_INSTALL_BINDIR})
install(FILES include/nabla.h DESTINATION ${CMAKE_INSTALL_INCLUDEDIR})
install(EXPORT nablaTargets NAMESPACE nabla:: DESTINATION ${CMAKE_INSTALL_LIBDIR}/cmake/nabla)

# built with MPI: its CMake package and pkg-config module are dependencies of the static library
if(MPI_C_FOUND)
  set(NB_CONFIG_MPI TRUE)
  set(NB_PC_MPI " ompi-c")
else()
  set(NB_CONFIG_MPI FALSE)
  set(NB_PC_MPI "")
endif()
configure_package_config_file(${CMAKE_CURRENT_LIST_DIR}/nablaConfig.cmake.in
  ${CMAKE_CURRENT_BINARY_DIR}/nablaConfig.cmake
  INSTALL_DESTINATION ${CMAKE_INSTALL_LIBDIR}/cmake/nabla)
write_basic_package_version_file(${CMAKE_CURRENT_BINARY_DIR}/nablaConfigVersion.cmake
  VERSION ${PROJECT_VERSION} COMPATIBILITY SameMinorVersion)
install(FILES ${CMAKE_CURRENT_BINARY_DIR}/nablaConfig.cmake ${CMAKE_CURRENT_BINARY_DIR}/nablaConfigVersion.cmake
  DESTINATION ${CMAKE_INSTALL_LIBDIR}/cmake/nabla)

# prefix relative to the .pc file, so `cmake --install --prefix X` needs no reconfigure
file(RELATIVE_PATH NB_PC_TO_PREFIX "/p/${CMAKE_INSTALL_LIBDIR}/pkgconfig" "/p")
configure_file(${CMAKE_CURRENT_LIST_DIR}/nabla.pc.in ${CMAKE_CURRENT_BINARY_DIR}/nabla.pc @ONLY)
install(FILES ${CMAKE_CURRENT_BINARY_DIR}/nabla.pc DESTINATION ${CMAKE_INSTALL_LIBDIR}/pkgconfig)

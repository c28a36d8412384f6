# What `cmake --install build --prefix P` puts under P, and `cpack -G DEB` into a .deb:
#   bin/tarmac                                  the CLI
#   LIBDIR/libtarmac_c.so*, libtarmac_reader.so*  the reader: C ABI, C++ API
#   LIBDIR/tarmac/libtarmac_opencv_codecs.so    the codec plugin, found relative to the binary
#                                               or library loading it (lib/transform)
#   include/tarmac/{read,common,format}/*.h     the public headers ("read/dataset.h", ...)
#   LIBDIR/cmake/tarmac/                        find_package(tarmac): tarmac::reader, tarmac::c
#   LIBDIR/pkgconfig/tarmac.pc, tarmac-c.pc     pkg-config, relative to their own place
#   PYTHONDIR/tarmac/                           the Python package, with _install.py saying
#                                               where the library is, relative to the package
# Every path inside is relative, so the installed tree works wherever it is moved.
include(CMakePackageConfigHelpers)

set(TARMAC_INSTALL_PYTHONDIR "lib/python3/dist-packages" CACHE STRING
    "Where cmake --install puts the Python package, under the prefix (Debian's python3 looks in /usr/lib/python3/dist-packages)")
set(TARMAC_INSTALL_CMAKEDIR "${CMAKE_INSTALL_LIBDIR}/cmake/tarmac")
set(TARMAC_INSTALL_PLUGINDIR "${CMAKE_INSTALL_LIBDIR}/tarmac")

install(TARGETS tarmac RUNTIME DESTINATION ${CMAKE_INSTALL_BINDIR})
install(TARGETS tarmac_opencv_codecs LIBRARY DESTINATION ${TARMAC_INSTALL_PLUGINDIR})

# The public headers keep their folders, so code includes them as in this tree.
target_include_directories(tarmac_reader INTERFACE
  $<INSTALL_INTERFACE:${CMAKE_INSTALL_INCLUDEDIR}/tarmac>)
target_include_directories(tarmac_c INTERFACE
  $<INSTALL_INTERFACE:${CMAKE_INSTALL_INCLUDEDIR}/tarmac>)
set_target_properties(tarmac_reader PROPERTIES EXPORT_NAME reader)
set_target_properties(tarmac_c PROPERTIES EXPORT_NAME c)
install(TARGETS tarmac_reader tarmac_c EXPORT tarmacTargets
  LIBRARY DESTINATION ${CMAKE_INSTALL_LIBDIR})
foreach(header read/dataset.h read/derived_column.h read/augment.h read/batch_loader.h read/partition.h read/c_api.h read/geometry.h common/dtype.h
               common/error.h format/field_spec.h format/field_geometry.h format/names.h)
  get_filename_component(dir ${header} DIRECTORY)
  install(FILES lib/${header} DESTINATION ${CMAKE_INSTALL_INCLUDEDIR}/tarmac/${dir})
endforeach()

install(EXPORT tarmacTargets NAMESPACE tarmac:: DESTINATION ${TARMAC_INSTALL_CMAKEDIR})
configure_package_config_file(cmake/tarmacConfig.cmake.in
  ${PROJECT_BINARY_DIR}/install/tarmacConfig.cmake INSTALL_DESTINATION ${TARMAC_INSTALL_CMAKEDIR})
# 0.x: a minor release may change the ABI, so only the same major.minor is compatible.
write_basic_package_version_file(${PROJECT_BINARY_DIR}/install/tarmacConfigVersion.cmake
  COMPATIBILITY SameMinorVersion)
install(FILES ${PROJECT_BINARY_DIR}/install/tarmacConfig.cmake
              ${PROJECT_BINARY_DIR}/install/tarmacConfigVersion.cmake
        DESTINATION ${TARMAC_INSTALL_CMAKEDIR})

# pkg-config files that find the prefix from their own folder (${pcfiledir}), so a moved tree
# or the .deb's /usr (cpack installs with another prefix than the configured one) is right.
file(RELATIVE_PATH TARMAC_PC_TO_PREFIX "/p/${CMAKE_INSTALL_LIBDIR}/pkgconfig" "/p")
string(REGEX REPLACE "/$" "" TARMAC_PC_TO_PREFIX "${TARMAC_PC_TO_PREFIX}")
foreach(pc tarmac tarmac-c)
  configure_file(cmake/${pc}.pc.in ${PROJECT_BINARY_DIR}/install/${pc}.pc @ONLY)
  install(FILES ${PROJECT_BINARY_DIR}/install/${pc}.pc
          DESTINATION ${CMAKE_INSTALL_LIBDIR}/pkgconfig)
endforeach()

# The Python package, and where the library is relative to it (python/tarmac/__init__.py).
# Every module, and py.typed (PEP 561: the package's type hints are for type checkers to use).
install(DIRECTORY python/tarmac DESTINATION ${TARMAC_INSTALL_PYTHONDIR}
        FILES_MATCHING PATTERN "*.py" PATTERN "py.typed" PATTERN "__pycache__" EXCLUDE)
if(IS_ABSOLUTE "${TARMAC_INSTALL_PYTHONDIR}")
  file(RELATIVE_PATH TARMAC_PY_TO_LIBDIR "${TARMAC_INSTALL_PYTHONDIR}/tarmac"
       "${CMAKE_INSTALL_FULL_LIBDIR}")
else()
  file(RELATIVE_PATH TARMAC_PY_TO_LIBDIR "/p/${TARMAC_INSTALL_PYTHONDIR}/tarmac"
       "/p/${CMAKE_INSTALL_LIBDIR}")
endif()
string(REGEX REPLACE "/$" "" TARMAC_PY_TO_LIBDIR "${TARMAC_PY_TO_LIBDIR}")
configure_file(cmake/_install.py.in ${PROJECT_BINARY_DIR}/install/_install.py @ONLY)
install(FILES ${PROJECT_BINARY_DIR}/install/_install.py
        DESTINATION ${TARMAC_INSTALL_PYTHONDIR}/tarmac)

# cpack -G DEB: one package for Debian 12. Library dependencies come from dpkg-shlibdeps; the
# Python package's are listed by hand.
set(CPACK_PACKAGE_NAME tarmac)
set(CPACK_PACKAGE_VERSION ${PROJECT_VERSION})
set(CPACK_PACKAGE_DESCRIPTION_SUMMARY
    "image datasets to tar shards plus one safetensors annotation file, and their reader")
set(CPACK_PACKAGE_CONTACT "tarmac maintainers <tarmac@localhost>")
set(CPACK_PACKAGING_INSTALL_PREFIX /usr)
set(CPACK_STRIP_FILES ON)
set(CPACK_DEBIAN_FILE_NAME DEB-DEFAULT)
set(CPACK_DEBIAN_PACKAGE_SECTION science)
set(CPACK_DEBIAN_PACKAGE_SHLIBDEPS ON)
set(CPACK_DEBIAN_PACKAGE_GENERATE_SHLIBS ON)
set(CPACK_DEBIAN_PACKAGE_DEPENDS "python3 (>= 3.9), python3-numpy")
set(CPACK_GENERATOR DEB)
include(CPack)

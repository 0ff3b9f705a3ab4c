# FindOpenBLAS: defines the imported target OpenBLAS::OpenBLAS (libopenblas and the directory of its cblas.h).
#
# hxrt links OpenBLAS through this target rather than by path, so the installed hxrtTargets.cmake names
# OpenBLAS::OpenBLAS instead of the build machine's absolute libopenblas.so path; hxrtConfig.cmake installs this
# module beside itself and calls find_dependency(OpenBLAS) so a consumer finds the library on its own machine.
# pkg-config, when present, only supplies search hints: the module works without it.
#
# Result variables: OpenBLAS_FOUND, OpenBLAS_LIBRARY, OpenBLAS_INCLUDE_DIR.
find_package(PkgConfig QUIET)
if(PKG_CONFIG_FOUND)
  pkg_check_modules(PC_OPENBLAS QUIET openblas)
endif()
find_path(OpenBLAS_INCLUDE_DIR NAMES cblas.h
          HINTS ${PC_OPENBLAS_INCLUDE_DIRS}
          PATH_SUFFIXES openblas openblas-pthread openblas-openmp openblas-serial
                        x86_64-linux-gnu/openblas-pthread aarch64-linux-gnu/openblas-pthread)
find_library(OpenBLAS_LIBRARY NAMES openblas
             HINTS ${PC_OPENBLAS_LIBRARY_DIRS}
             PATH_SUFFIXES openblas-pthread openblas-openmp openblas-serial)
include(FindPackageHandleStandardArgs)
find_package_handle_standard_args(OpenBLAS REQUIRED_VARS OpenBLAS_LIBRARY OpenBLAS_INCLUDE_DIR)
mark_as_advanced(OpenBLAS_INCLUDE_DIR OpenBLAS_LIBRARY)
if(OpenBLAS_FOUND AND NOT TARGET OpenBLAS::OpenBLAS)
  add_library(OpenBLAS::OpenBLAS UNKNOWN IMPORTED)
  set_target_properties(OpenBLAS::OpenBLAS PROPERTIES IMPORTED_LOCATION "${OpenBLAS_LIBRARY}"
                                                     INTERFACE_INCLUDE_DIRECTORIES "${OpenBLAS_INCLUDE_DIR}")
endif()

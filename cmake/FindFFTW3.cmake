# FindFFTW3: FFTW 3, double precision (Debian's libfftw3-dev ships no CMake package file).
# Defines FFTW3_FOUND, FFTW3_INCLUDE_DIR, FFTW3_LIBRARY and the imported target FFTW3::fftw3.
# The static archive is preferred (Debian's is position-independent): herd's programs and
# libherd.so then need no libfftw3.so at run time, also where they are carried to a machine
# without the package. FFTW is GPL-2.0-or-later: binaries that contain it are under its terms.
find_path(FFTW3_INCLUDE_DIR fftw3.h HINTS ${FFTW3_ROOT} $ENV{FFTW3_ROOT} PATH_SUFFIXES include)
find_library(FFTW3_LIBRARY NAMES libfftw3.a fftw3 HINTS ${FFTW3_ROOT} $ENV{FFTW3_ROOT} PATH_SUFFIXES lib64 lib)
include(FindPackageHandleStandardArgs)
find_package_handle_standard_args(FFTW3 REQUIRED_VARS FFTW3_LIBRARY FFTW3_INCLUDE_DIR)
if(FFTW3_FOUND AND NOT TARGET FFTW3::fftw3)
  add_library(FFTW3::fftw3 UNKNOWN IMPORTED)
  set_target_properties(FFTW3::fftw3 PROPERTIES
    IMPORTED_LOCATION "${FFTW3_LIBRARY}"
    INTERFACE_INCLUDE_DIRECTORIES "${FFTW3_INCLUDE_DIR}")
endif()
mark_as_advanced(FFTW3_INCLUDE_DIR FFTW3_LIBRARY)

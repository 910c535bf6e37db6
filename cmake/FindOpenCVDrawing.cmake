# FindOpenCVDrawing — only OpenCV's core and imgproc (drawing), as OpenCV::core and OpenCV::imgproc.
# Debian's libopencv-core-dev/libopencv-imgproc-dev ship no CMake config (that comes with the whole
# libopencv-dev, every module and its dependencies), so find the two libraries directly.
find_path(OpenCVDrawing_INCLUDE_DIR opencv2/core.hpp PATH_SUFFIXES opencv4)
# VC_OPENCV_STATIC links the two static archives instead (the GPU machine's bundle: Debian's shared opencv_core
# drags in LAPACK, BLAS, gfortran and X11, ~20 MB, none of which drawing needs).
option(VC_OPENCV_STATIC "Link OpenCV core/imgproc statically" OFF)
if(VC_OPENCV_STATIC)
  find_library(OpenCVDrawing_CORE_LIBRARY libopencv_core.a)
  find_library(OpenCVDrawing_IMGPROC_LIBRARY libopencv_imgproc.a)
  find_library(OpenCVDrawing_GLX_LIBRARY GLX)  # opencv_core's OpenGL interop references three glX symbols
  find_library(OpenCVDrawing_TBB_LIBRARY tbb)
  find_package(ZLIB REQUIRED)
  set(_opencv_static_deps ${OpenCVDrawing_GLX_LIBRARY} ${OpenCVDrawing_TBB_LIBRARY} ZLIB::ZLIB ${CMAKE_DL_LIBS})
else()
  find_library(OpenCVDrawing_CORE_LIBRARY opencv_core)
  find_library(OpenCVDrawing_IMGPROC_LIBRARY opencv_imgproc)
endif()
if(OpenCVDrawing_INCLUDE_DIR AND EXISTS "${OpenCVDrawing_INCLUDE_DIR}/opencv2/core/version.hpp")
  file(STRINGS "${OpenCVDrawing_INCLUDE_DIR}/opencv2/core/version.hpp" _v REGEX "^#define CV_VERSION_(MAJOR|MINOR|REVISION) +[0-9]+")
  string(REGEX REPLACE ".*CV_VERSION_MAJOR +([0-9]+).*" "\\1" _maj "${_v}")
  string(REGEX REPLACE ".*CV_VERSION_MINOR +([0-9]+).*" "\\1" _min "${_v}")
  string(REGEX REPLACE ".*CV_VERSION_REVISION +([0-9]+).*" "\\1" _rev "${_v}")
  set(OpenCVDrawing_VERSION "${_maj}.${_min}.${_rev}")
endif()
include(FindPackageHandleStandardArgs)
find_package_handle_standard_args(OpenCVDrawing
  REQUIRED_VARS OpenCVDrawing_CORE_LIBRARY OpenCVDrawing_IMGPROC_LIBRARY OpenCVDrawing_INCLUDE_DIR
  VERSION_VAR OpenCVDrawing_VERSION)
if(OpenCVDrawing_FOUND AND NOT TARGET OpenCV::core)
  add_library(OpenCV::core UNKNOWN IMPORTED)
  set_target_properties(OpenCV::core PROPERTIES IMPORTED_LOCATION "${OpenCVDrawing_CORE_LIBRARY}"
    INTERFACE_INCLUDE_DIRECTORIES "${OpenCVDrawing_INCLUDE_DIR}" INTERFACE_LINK_LIBRARIES "${_opencv_static_deps}")
  add_library(OpenCV::imgproc UNKNOWN IMPORTED)
  set_target_properties(OpenCV::imgproc PROPERTIES IMPORTED_LOCATION "${OpenCVDrawing_IMGPROC_LIBRARY}"
    INTERFACE_LINK_LIBRARIES OpenCV::core)
endif()

# FindOpenCVDrawing — only OpenCV's core and imgproc (drawing), as OpenCV::core and OpenCV::imgproc.
# Debian's libopencv-core-dev/libopencv-imgproc-dev ship no CMake config (that comes with the whole
# libopencv-dev, every module and its dependencies), so find the two libraries directly.
find_path(OpenCVDrawing_INCLUDE_DIR opencv2/core.hpp PATH_SUFFIXES opencv4)
find_library(OpenCVDrawing_CORE_LIBRARY opencv_core)
find_library(OpenCVDrawing_IMGPROC_LIBRARY opencv_imgproc)
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
    INTERFACE_INCLUDE_DIRECTORIES "${OpenCVDrawing_INCLUDE_DIR}")
  add_library(OpenCV::imgproc UNKNOWN IMPORTED)
  set_target_properties(OpenCV::imgproc PROPERTIES IMPORTED_LOCATION "${OpenCVDrawing_IMGPROC_LIBRARY}"
    INTERFACE_LINK_LIBRARIES OpenCV::core)
endif()

# An OpenCL that is not installed: neither library nor headers, reported as CMake's FindOpenCL does.
include(FindPackageHandleStandardArgs)
set(OpenCL_LIBRARY OpenCL_LIBRARY-NOTFOUND)
set(OpenCL_INCLUDE_DIR OpenCL_INCLUDE_DIR-NOTFOUND)
find_package_handle_standard_args(OpenCL DEFAULT_MSG OpenCL_LIBRARY OpenCL_INCLUDE_DIR)

# Stands in for Debian's dnnl-config.cmake on a machine without ocl-icd-opencl-dev: like the real one it
# puts its own folder first on CMAKE_MODULE_PATH and asks for OpenCL with REQUIRED, and the FindOpenCL.cmake
# beside it finds nothing, so configure stops with "Could NOT find OpenCL (missing: ...)".
list(INSERT CMAKE_MODULE_PATH 0 "${CMAKE_CURRENT_LIST_DIR}")
find_package(OpenCL REQUIRED)
message(FATAL_ERROR "broken-dnnl: unreachable, find_package(OpenCL REQUIRED) should have stopped configure")

# An optional part whose detection fails never fails configure; it turns off with
# one line saying why. Configures detaudit (configure only: no CUDA, tests or benchmarks unless the case
# needs them) with a package config that stops with FATAL_ERROR, and checks that
#   - configure exits 0,
#   - exactly one "-- detaudit: <part> OFF: <reason>" line carries the config's own error,
#   - (onednn) the generated header carries the same reason as DETAUDIT_ONEDNN_OFF_REASON.
# The hwloc case: a vendored hwloc that does not link turns hwloc off the same way.
# cmake -DCASE=onednn|benchmark|hwloc -DSOURCE_DIR=... -DWORK_DIR=... [-DGENERATOR=...] [-DC_COMPILER=...]
#       [-DCXX_COMPILER=...] [-DDEPS_DIR=...] -P configure_with_broken_package.cmake
foreach(_v CASE SOURCE_DIR WORK_DIR)
  if(NOT ${_v})
    message(FATAL_ERROR "configure check: -D${_v}=... is required")
  endif()
endforeach()

set(_here "${CMAKE_CURRENT_LIST_DIR}")
set(_args -S "${SOURCE_DIR}" -B "${WORK_DIR}" -DDETAUDIT_WITH_CUDA=OFF -DDETAUDIT_BUILD_TESTS=OFF)
if(GENERATOR)
  list(APPEND _args -G "${GENERATOR}")
endif()
foreach(_pair "C_COMPILER;CMAKE_C_COMPILER" "CXX_COMPILER;CMAKE_CXX_COMPILER" "DEPS_DIR;DETAUDIT_DEPS_DIR")
  list(GET _pair 0 _in)
  list(GET _pair 1 _out)
  if(${_in})
    list(APPEND _args "-D${_out}=${${_in}}")
  endif()
endforeach()

if(CASE STREQUAL "onednn")
  list(APPEND _args -DDETAUDIT_BUILD_BENCH=OFF "-Ddnnl_DIR=${_here}/broken-dnnl")
  set(_line_re "-- detaudit: onednn OFF: ([^\n]*)")
  set(_must "Could NOT find OpenCL (missing: OpenCL_LIBRARY OpenCL_INCLUDE_DIR)")
elseif(CASE STREQUAL "benchmark")
  list(APPEND _args -DDETAUDIT_BUILD_BENCH=ON "-Dbenchmark_DIR=${_here}/broken-benchmark")
  set(_line_re "-- detaudit: Google Benchmark OFF: ([^\n]*)")
  set(_must "The imported target \"benchmark::benchmark\" references the file")
elseif(CASE STREQUAL "hwloc")
  # The GPU machines' case: hwloc from a vendored folder (no pkg-config) whose libhwloc.so.15 cannot be
  # linked there (there: no libudev.so.1; here: a file that is no library at all).
  set(_deps "${WORK_DIR}-deps")
  file(REMOVE_RECURSE "${_deps}")
  file(MAKE_DIRECTORY "${_deps}/include" "${_deps}/lib")
  file(COPY /usr/include/hwloc.h /usr/include/hwloc DESTINATION "${_deps}/include")
  file(WRITE "${_deps}/lib/libhwloc.so" "not a shared library\n")
  list(FILTER _args EXCLUDE REGEX "^-DDETAUDIT_DEPS_DIR=")
  list(APPEND _args -DDETAUDIT_BUILD_BENCH=OFF -DCMAKE_DISABLE_FIND_PACKAGE_PkgConfig=ON "-DDETAUDIT_DEPS_DIR=${_deps}")
  set(_line_re "-- detaudit: hwloc OFF: ([^\n]*)")
  set(_must "does not build here")
else()
  message(FATAL_ERROR "configure check: unknown CASE '${CASE}' (onednn, benchmark or hwloc)")
endif()

file(REMOVE_RECURSE "${WORK_DIR}")
execute_process(COMMAND "${CMAKE_COMMAND}" ${_args} RESULT_VARIABLE _rc OUTPUT_VARIABLE _out ERROR_VARIABLE _err)
set(_log "--- stdout ---\n${_out}\n--- stderr ---\n${_err}")
if(NOT _rc EQUAL 0)
  message(FATAL_ERROR "FAIL: configure with a broken ${CASE} config exited ${_rc}; it must turn ${CASE} off instead\n${_log}")
endif()

string(REPLACE ";" "," _flat "${_out}")  # a reason may hold ';', which would split the list of matches
string(REGEX MATCHALL "${_line_re}" _lines "${_flat}")
list(LENGTH _lines _n)
if(NOT _n EQUAL 1)
  message(FATAL_ERROR "FAIL: expected exactly one line matching '${_line_re}', found ${_n}\n${_log}")
endif()
string(REGEX MATCH "${_line_re}" _line "${_out}")
set(_reason "${CMAKE_MATCH_1}")
string(FIND "${_reason}" "${_must}" _at)
if(_at LESS 0)
  message(FATAL_ERROR "FAIL: the OFF line does not say why ('${_must}'): '${_line}'\n${_log}")
endif()

if(CASE STREQUAL "onednn")
  set(_hdr "${WORK_DIR}/generated/detaudit_build_config.hpp")
  if(NOT EXISTS "${_hdr}")
    message(FATAL_ERROR "FAIL: ${_hdr} was not generated\n${_log}")
  endif()
  file(READ "${_hdr}" _h)
  string(FIND "${_h}" "#define DETAUDIT_ONEDNN_OFF_REASON R\"detaudit(${_reason})detaudit\"" _at)
  if(_at LESS 0)
    message(FATAL_ERROR "FAIL: ${_hdr} does not carry the reason '${_reason}':\n${_h}")
  endif()
endif()
message(STATUS "PASS: ${_line}")
file(REMOVE_RECURSE "${WORK_DIR}" "${WORK_DIR}-deps")

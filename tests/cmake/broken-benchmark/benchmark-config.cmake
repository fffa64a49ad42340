# Stands in for a Google Benchmark package whose library went missing: its imported target points at a
# file that does not exist, and the generated targets file stops configure, as CMake's own does.
message(FATAL_ERROR "The imported target \"benchmark::benchmark\" references the file\n"
                    "   \"${CMAKE_CURRENT_LIST_DIR}/libbenchmark.a\"\n"
                    "but this file does not exist.")

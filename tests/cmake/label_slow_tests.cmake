# Run by CTest after the tests of detaudit_tests are defined (tests/CMakeLists.txt): the tests that the
# slow filter discovered (TEST_LIST detaudit_slow_tests) get the labels cpu and slow.
if(detaudit_slow_tests)
  set_tests_properties(${detaudit_slow_tests} PROPERTIES LABELS "cpu;slow")
endif()

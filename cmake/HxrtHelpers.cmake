# Shared helpers for hxrt's per-layer targets.

set(HXRT_WARNINGS -Wall -Wextra -Wpedantic -Wshadow -Wnon-virtual-dtor -Wold-style-cast -Wcast-align
    -Woverloaded-virtual -Wnull-dereference -Wimplicit-fallthrough
    # Designated initializers that rely on default member initializers are idiomatic here.
    -Wno-missing-field-initializers)
# GCC 12's -Wmaybe-uninitialized reports std::variant members of braced attribute tables (ops/schemas) as possibly
# uninitialized once ASan's instrumentation changes inlining: false positives, so sanitizer builds drop that one
# warning (ordinary builds keep it, and -Werror).
if(CMAKE_CXX_COMPILER_ID STREQUAL "GNU" AND HXRT_SANITIZE)
  list(APPEND HXRT_WARNINGS -Wno-maybe-uninitialized)
endif()

# hxrt_layer(NAME SOURCES... DEPS ...) defines library hxrt_NAME for one layer.
function(hxrt_layer name)
  cmake_parse_arguments(ARG "" "" "SOURCES;DEPS;PRIVATE_DEPS" ${ARGN})
  add_library(hxrt_${name} ${ARG_SOURCES})
  add_library(hxrt::${name} ALIAS hxrt_${name})
  target_include_directories(hxrt_${name} PUBLIC
      $<BUILD_INTERFACE:${PROJECT_SOURCE_DIR}/include>
      $<INSTALL_INTERFACE:${CMAKE_INSTALL_INCLUDEDIR}>
      PRIVATE ${PROJECT_SOURCE_DIR}/src)
  target_link_libraries(hxrt_${name} PUBLIC ${ARG_DEPS} PRIVATE ${ARG_PRIVATE_DEPS})
  target_compile_options(hxrt_${name} PRIVATE ${HXRT_WARNINGS} $<$<BOOL:${HXRT_WERROR}>:-Werror>)
  set_target_properties(hxrt_${name} PROPERTIES POSITION_INDEPENDENT_CODE ON EXPORT_NAME ${name})
  set_property(GLOBAL APPEND PROPERTY HXRT_LAYER_TARGETS hxrt_${name})
endfunction()

# hxrt_test(NAME SOURCES... DEPS ... [LABELS ...]) defines one GoogleTest executable registered with CTest.
function(hxrt_test name)
  if(NOT HXRT_BUILD_TESTS)
    return()
  endif()
  cmake_parse_arguments(ARG "" "" "SOURCES;DEPS;LABELS" ${ARGN})
  add_executable(${name} ${ARG_SOURCES})
  target_include_directories(${name} PRIVATE ${PROJECT_SOURCE_DIR}/src ${PROJECT_SOURCE_DIR}/tests)
  target_link_libraries(${name} PRIVATE ${ARG_DEPS} GTest::gtest GTest::gtest_main GTest::gmock)
  target_compile_options(${name} PRIVATE ${HXRT_WARNINGS} $<$<BOOL:${HXRT_WERROR}>:-Werror>)
  # gtest_discover_tests flattens list-valued PROPERTIES, so the labels travel as one "a+b" label; ctest -L takes a
  # regular expression, so `ctest -L concurrency` still selects "unit+concurrency".
  string(JOIN "+" labels ${ARG_LABELS})
  gtest_discover_tests(${name} DISCOVERY_TIMEOUT 60 PROPERTIES LABELS "${labels}" TIMEOUT 300)
endfunction()

# hxrt_benchmark(NAME SOURCES... DEPS ...) defines one Google Benchmark program (never run by CTest).
function(hxrt_benchmark name)
  if(NOT HXRT_BUILD_BENCHMARKS)
    return()
  endif()
  cmake_parse_arguments(ARG "" "" "SOURCES;DEPS" ${ARGN})
  add_executable(${name} ${ARG_SOURCES})
  target_include_directories(${name} PRIVATE ${PROJECT_SOURCE_DIR}/src ${PROJECT_SOURCE_DIR}/tests)
  target_link_libraries(${name} PRIVATE ${ARG_DEPS} benchmark::benchmark)
  target_compile_options(${name} PRIVATE ${HXRT_WARNINGS} $<$<BOOL:${HXRT_WERROR}>:-Werror>)
endfunction()

# hxrt_write_if_changed(PATH CONTENT): writes a generated file only when its content changes, so that what includes
# it is not rebuilt on every configure.
function(hxrt_write_if_changed path content)
  set(old "")
  if(EXISTS ${path})
    file(READ ${path} old)
  endif()
  if(NOT "${old}" STREQUAL "${content}")
    file(WRITE ${path} "${content}")
  endif()
endfunction()

# hxrt_mpi_test(NAME RANKS TARGET [ARGS ...] [LABELS ...]): TARGET run by mpiexec as RANKS processes on this machine
# (loopback and shared memory only). Open MPI and PMIx keep their components loaded to the end, and ASan unwinds
# allocations fully there, so that LeakSanitizer names the MPI libraries' own allocations (tests/sanitizers/lsan.supp
# suppresses those, never hxrt's).
function(hxrt_mpi_test name ranks target)
  cmake_parse_arguments(ARG "" "" "ARGS;LABELS" ${ARGN})
  add_test(NAME ${name}
           COMMAND ${MPIEXEC_EXECUTABLE} --allow-run-as-root --oversubscribe --mca btl self,vader
                   ${MPIEXEC_NUMPROC_FLAG} ${ranks} $<TARGET_FILE:${target}> ${ARG_ARGS})
  set(environment OMPI_MCA_mca_base_component_disable_dlclose=1 PMIX_MCA_mca_base_component_disable_dlclose=1)
  if(HXRT_SANITIZE STREQUAL "address")
    list(APPEND environment "ASAN_OPTIONS=detect_leaks=1:abort_on_error=1:fast_unwind_on_malloc=0")
  endif()
  string(JOIN "+" labels ${ARG_LABELS})
  set_tests_properties(${name} PROPERTIES LABELS "${labels}" TIMEOUT 600 PROCESSORS 2 ENVIRONMENT "${environment}")
endfunction()

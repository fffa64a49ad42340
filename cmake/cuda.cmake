# CUDA is optional: check_language(CUDA), then enable_language(CUDA) when a compiler is found.
# Never link CUDA::cuda_driver: it is the stub libcuda.so and a binary linked to it cannot start
# without a driver. libcudart, libcublas, libcudnn and libcupti load the driver at run time.
option(DETAUDIT_WITH_CUDA "Build the CUDA backends when a CUDA toolkit is found" ON)
set(DETAUDIT_HAVE_CUDA OFF)
if(DETAUDIT_WITH_CUDA)
  include(CheckLanguage)
  if(NOT CMAKE_CUDA_COMPILER AND EXISTS /usr/local/cuda/bin/nvcc)
    set(CMAKE_CUDA_COMPILER /usr/local/cuda/bin/nvcc)
  endif()
  check_language(CUDA)
  if(CMAKE_CUDA_COMPILER)
    # Documented default: machine code for Turing (sm_75: T4), Ampere (sm_80: A100), Ada (sm_89: L4, L40S)
    # and Hopper (sm_90: H100, H200), plus PTX for newer chips (Blackwell JIT-compiles it). PTX runs only
    # on chips at least as new as it, so a T4 or an L4 without its own machine code would find "no kernel
    # image"; tests/cmake/cuda_archs.cmake checks the images in the built library.
    # `native` is not used: it fails on machines without a GPU. Override with -DCMAKE_CUDA_ARCHITECTURES=...
    if(NOT DEFINED CMAKE_CUDA_ARCHITECTURES)
      set(CMAKE_CUDA_ARCHITECTURES "75-real;80-real;89-real;90-real;90-virtual" CACHE STRING "CUDA architectures")
    endif()
    # One CUDA runtime per process: the shared libcudart that CUDA::cudart, cuBLAS and cuDNN use too.
    set(CMAKE_CUDA_RUNTIME_LIBRARY Shared)
    enable_language(CUDA)
    # CMake 3.25 does not know nvcc's C++20 flag (3.26 does); nvcc >= 12 accepts -std=c++20.
    if(NOT DEFINED CMAKE_CUDA20_STANDARD_COMPILE_OPTION OR CMAKE_CUDA20_STANDARD_COMPILE_OPTION STREQUAL "")
      set(CMAKE_CUDA20_STANDARD_COMPILE_OPTION "-std=c++20")
      set(CMAKE_CUDA20_EXTENSION_COMPILE_OPTION "-std=c++20")
    endif()
    set(CMAKE_CUDA_STANDARD 20)
    set(CMAKE_CUDA_STANDARD_REQUIRED ON)
    find_package(CUDAToolkit)
    # cuDNN may sit in the toolkit, in the system, or in a pip wheel (nvidia-cudnn-cu13): DETAUDIT_CUDNN_ROOT.
    set(DETAUDIT_CUDNN_ROOT "" CACHE PATH "cuDNN root holding include/ and lib/")
    find_library(CUDNN_LIB NAMES cudnn libcudnn.so.9
                 HINTS ${DETAUDIT_CUDNN_ROOT}/lib ${DETAUDIT_CUDNN_ROOT}/lib64 ${CUDAToolkit_LIBRARY_DIR})
    find_path(CUDNN_INCLUDE cudnn.h HINTS ${DETAUDIT_CUDNN_ROOT}/include ${CUDAToolkit_INCLUDE_DIRS})
    # Every CUDA library the backends link must exist, or CUDA turns off with the reason here (a missing
    # imported target would otherwise fail only at generation, after the whole configure).
    set(_missing "")
    if(NOT CUDAToolkit_FOUND)
      list(APPEND _missing "the CUDA toolkit's libraries")
    endif()
    foreach(_lib cudart cublas cublasLt cupti)
      if(CUDAToolkit_FOUND AND NOT TARGET CUDA::${_lib})
        list(APPEND _missing "CUDA::${_lib} (lib${_lib})")
      endif()
    endforeach()
    if(NOT CUDNN_LIB OR NOT CUDNN_INCLUDE)
      list(APPEND _missing "cuDNN (cudnn.h, libcudnn; set -DDETAUDIT_CUDNN_ROOT=...)")
    endif()
    if(NOT _missing)
      set(DETAUDIT_HAVE_CUDA ON)
      add_library(detaudit::cuda_libs INTERFACE IMPORTED)
      target_include_directories(detaudit::cuda_libs INTERFACE ${CUDNN_INCLUDE})
      target_link_libraries(detaudit::cuda_libs INTERFACE CUDA::cudart CUDA::cublas CUDA::cublasLt CUDA::cupti
                            ${CUDNN_LIB} ${CMAKE_DL_LIBS})
      # determinism: --fmad=false stops nvcc from fusing a*b+c on its own (the CUDA twin of
      # -ffp-contract=off); every FMA in the CUDA kernels is an explicit fmaf().
      target_compile_options(detaudit::cuda_libs INTERFACE $<$<COMPILE_LANGUAGE:CUDA>:--fmad=false>)
      # NCCL (its version, and the fleet's all-reduce) is opened with dlopen (kernels/cuda/nccl.cpp): no
      # link-time dependency, so a GPU machine without NCCL still starts the binaries.
    else()
      list(JOIN _missing ", " _missing)
      detaudit_off(cuda "CUDA compiler found but ${_missing} missing")
    endif()
  else()
    detaudit_off(cuda "no CUDA compiler found (nvcc not on PATH nor at /usr/local/cuda/bin)")
  endif()
else()
  detaudit_off(cuda "disabled with -DDETAUDIT_WITH_CUDA=OFF")
endif()
if(DETAUDIT_HAVE_CUDA)
  message(STATUS "detaudit: cuda ON archs=${CMAKE_CUDA_ARCHITECTURES}")
endif()

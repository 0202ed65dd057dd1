# CUDA is optional: found at configure time, switched with ATTNCHECK_CUDA (default: whether nvcc was
# found). CI machines have the CUDA 13 toolkit (nvcc, cuBLASLt, NCCL) but no GPU; CUDA targets build
# there and their tests report "Not Run" without a device.
include(CheckLanguage)
check_language(CUDA)
if(CMAKE_CUDA_COMPILER)
  set(_attncheck_cuda_found ON)
else()
  set(_attncheck_cuda_found OFF)
endif()
option(ATTNCHECK_CUDA "Build CUDA code (needs nvcc; default: whether it was found)" ${_attncheck_cuda_found})

if(ATTNCHECK_CUDA)
  if(NOT CMAKE_CUDA_COMPILER)
    message(FATAL_ERROR "ATTNCHECK_CUDA is ON but no CUDA compiler was found: put nvcc on PATH, set "
                        "CMAKE_CUDA_COMPILER, or configure with -DATTNCHECK_CUDA=OFF")
  endif()
  # sm_90 (H100/H200) and sm_80 (A100) unless the user chose.
  if(NOT DEFINED CMAKE_CUDA_ARCHITECTURES)
    set(CMAKE_CUDA_ARCHITECTURES 90 80)
  endif()
  enable_language(CUDA)
  # CMake 3.25's NVIDIA module stops at C++17 (it then rejects CUDA_STANDARD 20, which targets inherit
  # from CXX_STANDARD); nvcc 12+ takes -std=c++20, so tell CMake.
  if(CMAKE_CUDA_COMPILER_VERSION VERSION_GREATER_EQUAL 12.0 AND NOT DEFINED CMAKE_CUDA20_STANDARD_COMPILE_OPTION)
    set(CMAKE_CUDA20_STANDARD_COMPILE_OPTION "-std=c++20")
    set(CMAKE_CUDA20_EXTENSION_COMPILE_OPTION "-std=c++20")
  endif()
  set(CMAKE_CUDA_STANDARD 20)
  set(CMAKE_CUDA_STANDARD_REQUIRED ON)
  find_package(CUDAToolkit REQUIRED)
endif()

# CUDA is optional: found at configure time, switched with ATTNCHECK_CUDA (default: whether nvcc was
# found). CI machines have the CUDA 13 toolkit (nvcc, cuBLASLt, NCCL) but no GPU; CUDA targets build
# there and their tests report "Not Run" without a device.
include(CheckLanguage)
set(_attncheck_cuda_found OFF)
# Switched off with -D (the asan and fuzz presets): nvcc is not probed.
if(NOT (DEFINED CACHE{ATTNCHECK_CUDA} AND NOT ATTNCHECK_CUDA))
  check_language(CUDA)
  if(CMAKE_CUDA_COMPILER)
    set(_attncheck_cuda_found ON)
  endif()
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
  # NCCL (tensor parallelism across GPUs, cuda_impl/tp_comm); CMake has no module for it. The PyPI
  # nvidia-nccl wheel that torch depends on comes first: a process loads one libnccl.so.2, and
  # libtorch_cuda needs that newer one (the toolkit's 2.28 lacks symbols it uses); the toolkit's is the
  # fallback where torch is absent.
  find_package(Python3 COMPONENTS Interpreter QUIET)
  set(_attncheck_nccl_wheel "")
  if(Python3_Interpreter_FOUND)
    execute_process(
      COMMAND ${Python3_EXECUTABLE} -c "import nvidia.nccl, os; print(os.path.dirname(nvidia.nccl.__file__) if nvidia.nccl.__file__ else list(nvidia.nccl.__path__)[0])"
      OUTPUT_VARIABLE _attncheck_nccl_wheel OUTPUT_STRIP_TRAILING_WHITESPACE ERROR_QUIET)
  endif()
  if(_attncheck_nccl_wheel)  # only there first: default paths (the toolkit's lib/) would win otherwise
    find_library(_attncheck_nccl_library NAMES libnccl.so.2 nccl PATHS ${_attncheck_nccl_wheel}/lib NO_DEFAULT_PATH
                 NO_CACHE)
    find_path(_attncheck_nccl_include nccl.h PATHS ${_attncheck_nccl_wheel}/include NO_DEFAULT_PATH NO_CACHE)
  endif()
  if(NOT _attncheck_nccl_library OR NOT _attncheck_nccl_include)
    find_library(_attncheck_nccl_library nccl HINTS ${CUDAToolkit_LIBRARY_DIR} NO_CACHE)
    find_path(_attncheck_nccl_include nccl.h HINTS ${CUDAToolkit_INCLUDE_DIRS} NO_CACHE)
  endif()
  if(NOT _attncheck_nccl_library OR NOT _attncheck_nccl_include)
    message(FATAL_ERROR "ATTNCHECK_CUDA is ON but NCCL (libnccl, nccl.h) was found neither in Python's nvidia-nccl "
                        "wheel nor next to the CUDA toolkit (${CUDAToolkit_LIBRARY_DIR}): install NCCL or configure "
                        "with -DATTNCHECK_CUDA=OFF")
  endif()
  add_library(attncheck_nccl INTERFACE)
  target_link_libraries(attncheck_nccl INTERFACE ${_attncheck_nccl_library})
  target_include_directories(attncheck_nccl SYSTEM INTERFACE ${_attncheck_nccl_include})
endif()

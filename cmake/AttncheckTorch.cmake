# LibTorch is optional: it comes from PyPI's torch wheel (pinned in ci/requirements.txt, installed by
# ci/setup), which carries the C++ headers, libraries and TorchConfig.cmake; the Python interpreter
# says where. -DATTNCHECK_TORCH=ON|OFF builds torch_impl/ or not; without it,
# whether Torch is found decides, again at every configure (not cached: a build folder configured before
# ci/setup installed torch must not keep LibTorch off once it is there).
#
# The wheel's libtorch_cuda links the CUDA libraries of PyPI's nvidia-* wheels (NCCL, cuDNN, ...), which
# are newer than the toolkit's on this machine: attncheck_torch_runtime points the linker (rpath-link)
# at the wheels' folders so that those, not the toolkit's, resolve libtorch_cuda's references; at run
# time libtorch_cuda's own RPATH ($ORIGIN/../../nvidia/...) finds them.
#
# -DATTNCHECK_TORCH_SITE_PACKAGES=DIR builds against DIR/torch instead of the interpreter's torch: another
# machine's version (ci/gpu-bundle builds the torch plugin for a GPU machine's own torch, whose C++ ABI
# changes with every release). Only shared modules link it then (the plugin); executables that would link
# LibTorch's CUDA libraries, which are not here, leave it out (cuda_bench times SDPA through
# bench/sdpa_bench.py there).
find_package(Python3 REQUIRED COMPONENTS Interpreter)
set(ATTNCHECK_TORCH_SITE_PACKAGES "" CACHE PATH "a site-packages folder whose torch/ to build against (default: the Python interpreter's)")
set(_attncheck_torch_found OFF)
set(_attncheck_torch_status 1)
# Switched off with -D (the asan and fuzz presets): no probe. Importing torch and TorchConfig's CUDA
# detection cost 10-30 s of each configure.
if(ATTNCHECK_TORCH_SITE_PACKAGES)
  if(NOT EXISTS "${ATTNCHECK_TORCH_SITE_PACKAGES}/torch/share/cmake/Torch/TorchConfig.cmake")
    message(FATAL_ERROR "ATTNCHECK_TORCH_SITE_PACKAGES=${ATTNCHECK_TORCH_SITE_PACKAGES} holds no "
                        "torch/share/cmake/Torch/TorchConfig.cmake: name the folder that holds a torch wheel's torch/")
  endif()
  set(_attncheck_torch_paths "${ATTNCHECK_TORCH_SITE_PACKAGES}/torch/share/cmake;${ATTNCHECK_TORCH_SITE_PACKAGES}")
  set(_attncheck_torch_status 0)
elseif(NOT (DEFINED CACHE{ATTNCHECK_TORCH} AND NOT ATTNCHECK_TORCH))
  execute_process(
    # Where the torch package is, found without importing it (an import is 2 s of each configure); its
    # cmake_prefix_path is torch/share/cmake.
    COMMAND ${Python3_EXECUTABLE} -c "import importlib.util, os; torch = os.path.dirname(importlib.util.find_spec('torch').origin); print(os.path.join(torch, 'share', 'cmake')); print(os.path.dirname(torch))"
    OUTPUT_VARIABLE _attncheck_torch_paths RESULT_VARIABLE _attncheck_torch_status ERROR_QUIET
    OUTPUT_STRIP_TRAILING_WHITESPACE)
endif()
if(_attncheck_torch_status EQUAL 0)
  string(REPLACE "\n" ";" _attncheck_torch_paths "${_attncheck_torch_paths}")
  list(GET _attncheck_torch_paths 0 _attncheck_torch_prefix)
  list(GET _attncheck_torch_paths 1 _attncheck_site_packages)
  # Name the GPU architectures (those of AttncheckCuda) so that TorchConfig does not try to detect a GPU
  # by compiling and running a CUDA probe (there is no GPU here, and the probe fails under C++20 CUDA).
  if(NOT DEFINED TORCH_CUDA_ARCH_LIST)
    set(TORCH_CUDA_ARCH_LIST "8.0;9.0")
  endif()
  # TorchConfig sets CMAKE_CUDA_ARCHITECTURES to OFF in the caller's scope (with a warning) and appends
  # its own nvcc flags (-gencode lists, ONNX defines, diagnostics suppressed) to CMAKE_CUDA_FLAGS: keep
  # ours for attncheck's own CUDA targets, which do not build against torch.
  set(_attncheck_cuda_architectures "${CMAKE_CUDA_ARCHITECTURES}")
  set(_attncheck_cuda_flags "${CMAKE_CUDA_FLAGS}")
  unset(CMAKE_CUDA_ARCHITECTURES)
  find_package(Torch CONFIG QUIET PATHS ${_attncheck_torch_prefix} NO_DEFAULT_PATH)
  set(CMAKE_CUDA_ARCHITECTURES "${_attncheck_cuda_architectures}")
  set(CMAKE_CUDA_FLAGS "${_attncheck_cuda_flags}")
  if(Torch_FOUND)
    set(_attncheck_torch_found ON)
  endif()
endif()
if(NOT DEFINED CACHE{ATTNCHECK_TORCH})
  # Not given with -D: decided here at every configure (a plain variable, never cached).
  set(ATTNCHECK_TORCH ${_attncheck_torch_found})
endif()

if(ATTNCHECK_TORCH)
  if(NOT Torch_FOUND)
    message(FATAL_ERROR "ATTNCHECK_TORCH is ON but LibTorch was not found: run ci/setup (pip install -r "
                        "ci/requirements.txt) or configure with -DATTNCHECK_TORCH=OFF")
  endif()
  add_library(attncheck_torch_runtime INTERFACE)
  target_link_libraries(attncheck_torch_runtime INTERFACE torch)
  file(GLOB _attncheck_nvidia_lib_dirs LIST_DIRECTORIES true "${_attncheck_site_packages}/nvidia/*/lib")
  foreach(dir IN LISTS _attncheck_nvidia_lib_dirs)
    target_link_options(attncheck_torch_runtime INTERFACE "-Wl,-rpath-link,${dir}")
  endforeach()
  message(STATUS "attncheck: LibTorch ${Torch_VERSION} from ${_attncheck_torch_prefix}")
endif()

#===- SetWhileCubins.cmake - Build and embed the kiln_set_while cubins -----===#
#
# The setter of CUDA conditional WHILE nodes (lib/SetWhileKernel.cu) calls
# cudaGraphSetConditional, which lives in libcudadevrt: the driver's PTX JIT
# cannot link it, so the kernel is built here, with nvcc -rdc=true -c and
# nvlink -lcudadevrt, into one cubin per architecture major nvcc supports
# among sm_80, sm_90, sm_100 and sm_120 (a cubin runs on the minors of its
# major at or above its own). EmbedCubins.cmake writes them as byte arrays
# into generated/SetWhileCubins.inc, which lib/SetWhileKernel.cpp includes.
#
# Without nvcc, nvlink or libcudadevrt, with a CUDA toolkit older than 12.3
# (no cudaGraphSetConditional), when a trial compile fails, or with
# -DKILN_BUILD_SET_WHILE_CUBINS=OFF, the table is empty: device-side loops
# then read their flags on the host even under graph replay
# (docs/runtime.md "Device-side loops").
#
# Sets KILN_SET_WHILE_ARCHS ("80;90;100;120", or empty) and
# KILN_SET_WHILE_INC (the generated file).
#
#===------------------------------------------------------------------------===#

option(KILN_BUILD_SET_WHILE_CUBINS
  "Build the kiln_set_while cubins with nvcc (CUDA conditional graph nodes for device-side loops)"
  ON)
set(KILN_SET_WHILE_ARCHS "")
set(KILN_SET_WHILE_INC ${CMAKE_CURRENT_BINARY_DIR}/generated/SetWhileCubins.inc)
set(kiln_set_while_source ${CMAKE_CURRENT_SOURCE_DIR}/lib/SetWhileKernel.cu)
set(kiln_set_while_embed ${CMAKE_CURRENT_SOURCE_DIR}/cmake/EmbedCubins.cmake)
set(kiln_set_while_dir ${CMAKE_CURRENT_BINARY_DIR}/set-while)

set(kiln_set_while_off "")
if(NOT KILN_BUILD_SET_WHILE_CUBINS)
  set(kiln_set_while_off "KILN_BUILD_SET_WHILE_CUBINS is OFF")
elseif(NOT KILN_CUDA_INCLUDE_DIR)
  set(kiln_set_while_off "no cuda.h")
else()
  get_filename_component(kiln_cuda_root ${KILN_CUDA_INCLUDE_DIR}/.. ABSOLUTE)
  find_program(KILN_NVCC nvcc HINTS ${kiln_cuda_root}/bin ${CUDAToolkit_BIN_DIR}
    /usr/local/cuda/bin)
  if(NOT KILN_NVCC)
    set(kiln_set_while_off "no nvcc")
  else()
    get_filename_component(kiln_nvcc_bin ${KILN_NVCC} DIRECTORY)
    get_filename_component(kiln_nvcc_root ${kiln_nvcc_bin}/.. ABSOLUTE)
    find_program(KILN_NVLINK nvlink HINTS ${kiln_nvcc_bin} NO_DEFAULT_PATH)
    find_library(KILN_CUDADEVRT_LIBRARY NAMES cudadevrt
      HINTS ${kiln_nvcc_root}/lib64 ${kiln_nvcc_root}/lib
            ${kiln_nvcc_root}/targets/x86_64-linux/lib NO_DEFAULT_PATH)
    set(kiln_devrt_header ${kiln_nvcc_root}/include/cuda_device_runtime_api.h)
    set(kiln_has_set_conditional "")
    if(EXISTS ${kiln_devrt_header})
      file(STRINGS ${kiln_devrt_header} kiln_has_set_conditional
        REGEX "cudaGraphSetConditional")
    endif()
    if(NOT KILN_NVLINK)
      set(kiln_set_while_off "no nvlink next to ${KILN_NVCC}")
    elseif(NOT KILN_CUDADEVRT_LIBRARY)
      set(kiln_set_while_off "no libcudadevrt under ${kiln_nvcc_root}")
    elseif(NOT kiln_has_set_conditional)
      set(kiln_set_while_off
        "the CUDA toolkit at ${kiln_nvcc_root} has no cudaGraphSetConditional (12.3 or later)")
    endif()
  endif()
endif()

if(NOT kiln_set_while_off)
  get_filename_component(kiln_devrt_dir ${KILN_CUDADEVRT_LIBRARY} DIRECTORY)
  execute_process(COMMAND ${KILN_NVCC} --list-gpu-arch
    OUTPUT_VARIABLE kiln_nvcc_archs RESULT_VARIABLE kiln_nvcc_result ERROR_QUIET)
  foreach(sm 80 90 100 120)
    if(kiln_nvcc_result EQUAL 0 AND kiln_nvcc_archs MATCHES "(^|\n)compute_${sm}(\n|$)")
      list(APPEND KILN_SET_WHILE_ARCHS ${sm})
    endif()
  endforeach()
  # One trial build at configure time: a host compiler nvcc refuses (too
  # new a gcc) turns the feature off instead of failing every build.
  file(MAKE_DIRECTORY ${kiln_set_while_dir})
  if(NOT KILN_SET_WHILE_ARCHS)
    set(kiln_set_while_off "${KILN_NVCC} supports none of sm_80, sm_90, sm_100, sm_120")
  else()
    list(GET KILN_SET_WHILE_ARCHS 0 kiln_first_sm)
    execute_process(
      COMMAND ${KILN_NVCC} -rdc=true -c -arch=sm_${kiln_first_sm}
              ${kiln_set_while_source} -o ${kiln_set_while_dir}/trial.o
      RESULT_VARIABLE kiln_trial_result OUTPUT_QUIET ERROR_VARIABLE kiln_trial_error)
    if(kiln_trial_result EQUAL 0)
      execute_process(
        COMMAND ${KILN_NVLINK} -arch=sm_${kiln_first_sm} ${kiln_set_while_dir}/trial.o
                -L${kiln_devrt_dir} -lcudadevrt -o ${kiln_set_while_dir}/trial.cubin
        RESULT_VARIABLE kiln_trial_result OUTPUT_QUIET ERROR_VARIABLE kiln_trial_error)
    endif()
    if(NOT kiln_trial_result EQUAL 0)
      string(STRIP "${kiln_trial_error}" kiln_trial_error)
      set(kiln_set_while_off "a trial build failed: ${kiln_trial_error}")
    endif()
  endif()
endif()

if(kiln_set_while_off)
  set(KILN_SET_WHILE_ARCHS "")
  message(STATUS "kiln_set_while cubins: not built (${kiln_set_while_off}); "
                 "device-side loops read their flags on the host")
  execute_process(COMMAND ${CMAKE_COMMAND} -DOUTPUT=${KILN_SET_WHILE_INC}
    -DARCHS= -DDIR=${kiln_set_while_dir} -P ${kiln_set_while_embed})
else()
  string(REPLACE ";" ", sm_" kiln_set_while_names "${KILN_SET_WHILE_ARCHS}")
  message(STATUS "kiln_set_while cubins: sm_${kiln_set_while_names} (${KILN_NVCC})")
  set(kiln_set_while_cubins "")
  foreach(sm ${KILN_SET_WHILE_ARCHS})
    set(object ${kiln_set_while_dir}/set_while_sm${sm}.o)
    set(cubin ${kiln_set_while_dir}/set_while_sm${sm}.cubin)
    add_custom_command(OUTPUT ${cubin}
      COMMAND ${KILN_NVCC} -rdc=true -c -arch=sm_${sm} ${kiln_set_while_source}
              -o ${object}
      COMMAND ${KILN_NVLINK} -arch=sm_${sm} ${object} -L${kiln_devrt_dir}
              -lcudadevrt -o ${cubin}
      DEPENDS ${kiln_set_while_source}
      COMMENT "Building the kiln_set_while cubin for sm_${sm}"
      VERBATIM)
    list(APPEND kiln_set_while_cubins ${cubin})
  endforeach()
  # A list would split into several arguments: commas instead.
  string(REPLACE ";" "," kiln_set_while_arch_arg "${KILN_SET_WHILE_ARCHS}")
  add_custom_command(OUTPUT ${KILN_SET_WHILE_INC}
    COMMAND ${CMAKE_COMMAND} -DOUTPUT=${KILN_SET_WHILE_INC}
            -DARCHS=${kiln_set_while_arch_arg} -DDIR=${kiln_set_while_dir}
            -P ${kiln_set_while_embed}
    DEPENDS ${kiln_set_while_cubins} ${kiln_set_while_embed}
    COMMENT "Embedding the kiln_set_while cubins"
    VERBATIM)
endif()

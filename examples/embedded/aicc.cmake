# aicc.cmake: use an aicc bundle from CMake (3.19+).
#
#   include(path/to/aicc.cmake)
#   aicc_add_bundle(<target> <bundle_dir>
#                   [MODEL <model.onnx> [AICC_TARGET <aicc target>] [CONFIG <yaml>] [AICC <exe>]])
#   target_link_libraries(app PRIVATE <target>)
#
# Defines a static library <target> from the bundle's sources (<name>.c, aicc_rt.c and, when
# the weights are embedded, <name>_weights.S), with the bundle folder as a PUBLIC include
# directory, libm, and the target's ISA flags from manifest.json ("toolchain": "cflags") as
# PUBLIC compile and link options (the application must use the same ISA and float ABI).
# The compiler is CMake's (for a cross target use a toolchain file, e.g.
# cortex-m4/toolchain.cmake). With MODEL, the bundle is built at configure time by
# `aicc build` when missing or older than the model (or CONFIG), and CMake re-configures when
# they change.
include_guard(GLOBAL)
# the weights are assembled (.incbin); CMake needs the language enabled at directory scope
enable_language(ASM)

function(aicc_add_bundle target dir)
  cmake_parse_arguments(PARSE_ARGV 2 ARG "" "MODEL;AICC_TARGET;CONFIG;AICC" "")
  get_filename_component(dir "${dir}" ABSOLUTE BASE_DIR "${CMAKE_CURRENT_BINARY_DIR}")
  if(ARG_MODEL)
    get_filename_component(model "${ARG_MODEL}" ABSOLUTE)
    if(NOT ARG_AICC_TARGET)
      set(ARG_AICC_TARGET generic)
    endif()
    if(NOT ARG_AICC)
      find_program(ARG_AICC aicc REQUIRED)
    endif()
    set(deps "${model}")
    set(extra "")
    if(ARG_CONFIG)
      get_filename_component(cfg "${ARG_CONFIG}" ABSOLUTE)
      list(APPEND deps "${cfg}")
      set(extra -c "${cfg}")
    endif()
    set_property(DIRECTORY APPEND PROPERTY CMAKE_CONFIGURE_DEPENDS ${deps})
    set(stale FALSE)
    foreach(d ${deps})
      if(NOT EXISTS "${dir}/manifest.json" OR "${d}" IS_NEWER_THAN "${dir}/manifest.json")
        set(stale TRUE)
      endif()
    endforeach()
    if(stale)
      message(STATUS "aicc: building bundle ${dir} from ${model} (target ${ARG_AICC_TARGET})")
      execute_process(COMMAND "${ARG_AICC}" build "${model}" -t "${ARG_AICC_TARGET}"
                              -o "${dir}" ${extra}
                      RESULT_VARIABLE rc)
      if(NOT rc EQUAL 0)
        message(FATAL_ERROR "aicc build failed (${rc})")
      endif()
    endif()
  endif()
  if(NOT EXISTS "${dir}/manifest.json")
    message(FATAL_ERROR "aicc_add_bundle: ${dir} is not an aicc bundle (no manifest.json)")
  endif()
  file(READ "${dir}/manifest.json" manifest)
  string(JSON name GET "${manifest}" name)
  string(JSON embedded GET "${manifest}" weights_embedded)
  set(srcs "${dir}/${name}.c" "${dir}/aicc_rt.c")
  if(embedded)
    set(asm "${dir}/${name}_weights.S")
    list(APPEND srcs "${asm}")
    set_source_files_properties("${asm}" PROPERTIES
      LANGUAGE ASM
      COMPILE_DEFINITIONS "AICC_WEIGHTS_FILE=\"${dir}/weights.bin\""
      OBJECT_DEPENDS "${dir}/weights.bin")
  endif()
  add_library(${target} STATIC ${srcs})
  target_include_directories(${target} PUBLIC "${dir}")
  set_target_properties(${target} PROPERTIES C_STANDARD 99 C_STANDARD_REQUIRED ON
                                             C_EXTENSIONS OFF)
  string(JSON tc ERROR_VARIABLE no_tc GET "${manifest}" toolchain)
  if(NOT no_tc)
    string(JSON n LENGTH "${tc}" cflags)
    if(n GREATER 0)
      math(EXPR last "${n} - 1")
      foreach(i RANGE ${last})
        string(JSON flag GET "${tc}" cflags ${i})
        target_compile_options(${target} PUBLIC "${flag}")
        target_link_options(${target} PUBLIC "${flag}")    # picks the multilib (float ABI)
      endforeach()
    endif()
  endif()
  if(NOT MSVC)
    target_link_libraries(${target} PUBLIC m)
  endif()
endfunction()

# vkt_embed_shaders(TARGET <target> SOURCES a.comp b.comp ...)
#
# Compiles each GLSL compute shader to SPIR-V with glslangValidator (a compile
# error fails the build with glslang's message), validates it with spirv-val,
# and embeds the words into <target> through generated C++ sources: one
# std::span<const uint32_t> per shader, registered under the file's stem
# (shaders/saxpy.comp -> "saxpy"). Applications then need no shader files.

set(VKT_SHADER_TARGET_ENV vulkan1.1)
set(_vkt_shaders_dir "${CMAKE_CURRENT_LIST_DIR}")

function(vkt_embed_shaders)
  cmake_parse_arguments(ARG "" "TARGET" "SOURCES" ${ARGN})
  set(out_dir "${CMAKE_CURRENT_BINARY_DIR}/spirv")
  file(MAKE_DIRECTORY "${out_dir}")
  set(generated)
  set(names)
  foreach(src IN LISTS ARG_SOURCES)
    get_filename_component(abs "${src}" ABSOLUTE)
    get_filename_component(name "${src}" NAME_WE)
    get_filename_component(src_dir "${abs}" DIRECTORY)
    set(spv "${out_dir}/${name}.spv")
    set(cpp "${out_dir}/${name}.spv.cpp")
    # Two steps so that glslang's depfile (which names the .spv) matches its
    # command's output, and an included .glsl change recompiles only its users.
    add_custom_command(
      OUTPUT "${spv}"
      COMMAND "${VKT_GLSLANG}" -V --quiet --target-env ${VKT_SHADER_TARGET_ENV}
              -I${src_dir} --depfile "${spv}.d" -o "${spv}" "${abs}"
      COMMAND "${VKT_SPIRV_VAL}" --target-env ${VKT_SHADER_TARGET_ENV} "${spv}"
      DEPENDS "${abs}"
      DEPFILE "${spv}.d"
      COMMENT "Compiling shader ${name}.comp to SPIR-V"
      VERBATIM)
    add_custom_command(
      OUTPUT "${cpp}"
      COMMAND "${CMAKE_COMMAND}" -DSPV=${spv} -DOUT=${cpp} -DNAME=${name}
              -P "${_vkt_shaders_dir}/VktSpirvToCpp.cmake"
      DEPENDS "${spv}" "${_vkt_shaders_dir}/VktSpirvToCpp.cmake"
      COMMENT "Embedding ${name}.spv"
      VERBATIM)
    list(APPEND generated "${cpp}")
    list(APPEND names "${name}")
  endforeach()

  # The registry: one table of (name, span) built from every embedded shader.
  set(registry "${out_dir}/shader_registry.cpp")
  set(decls "")
  set(entries "")
  foreach(name IN LISTS names)
    string(APPEND decls "extern const std::span<const std::uint32_t> spirv_${name};\n")
    string(APPEND entries "    {\"${name}\", spirv_${name}},\n")
  endforeach()
  configure_file("${_vkt_shaders_dir}/shader_registry.cpp.in" "${registry}" @ONLY)
  target_sources(${ARG_TARGET} PRIVATE ${generated} "${registry}")
endfunction()

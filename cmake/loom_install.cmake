# One libloom for frontends, shared (with a SONAME) and static, made from
# the module libraries' objects, and what `cmake --install` puts under the
# prefix: include/loom/ (the umbrella loom.h and the module headers),
# lib/libloom.{so,a}, lib/cmake/loom/ (loom::loom, loom::loom_static),
# lib/pkgconfig/loom.pc and bin/loom.
#
# Only the public API is exported from the shared library: every module is
# compiled with hidden visibility and the public headers switch default
# visibility on around their declarations; the static archives linked into
# it (shaderc, glslang, SPIRV-Tools) export nothing (--exclude-libs).
include(GNUInstallDirs)
include(CMakePackageConfigHelpers)

set(loom_modules loom_ir loom_passes loom_compiler)
if(LOOM_RUNTIME)
  list(APPEND loom_modules loom_shaders loom_runtime)
  set(LOOM_HAS_RUNTIME 1)
else()
  set(LOOM_HAS_RUNTIME 0)
endif()
set(loom_objects "")
foreach(m ${loom_modules})
  list(APPEND loom_objects $<TARGET_OBJECTS:${m}>)
endforeach()

configure_file(${PROJECT_SOURCE_DIR}/include/loom/loom.h.in ${PROJECT_BINARY_DIR}/include/loom/loom.h @ONLY)

set(loom_private_libs Threads::Threads)
if(LOOM_RUNTIME)
  list(PREPEND loom_private_libs Vulkan::Vulkan ${LOOM_SHADERC_LIBS} stdc++ m)
endif()

add_library(loom_shared SHARED ${loom_objects})
set_target_properties(loom_shared PROPERTIES OUTPUT_NAME loom EXPORT_NAME loom VERSION ${PROJECT_VERSION}
                      SOVERSION ${PROJECT_VERSION_MAJOR} LINKER_LANGUAGE C)
target_link_libraries(loom_shared PRIVATE ${loom_private_libs})
target_link_options(loom_shared PRIVATE -Wl,--exclude-libs,ALL -Wl,--no-undefined)

add_library(loom_static STATIC ${loom_objects})
set_target_properties(loom_static PROPERTIES OUTPUT_NAME loom EXPORT_NAME loom_static)
target_link_libraries(loom_static INTERFACE ${loom_private_libs})

foreach(t loom_shared loom_static)
  add_dependencies(${t} ${loom_modules})
  target_include_directories(${t} INTERFACE $<INSTALL_INTERFACE:${CMAKE_INSTALL_INCLUDEDIR}>)
endforeach()

set(loom_public_headers
  ${PROJECT_BINARY_DIR}/include/loom/loom.h
  ${PROJECT_SOURCE_DIR}/ir/loom_ir.h ${PROJECT_SOURCE_DIR}/ir/loom_ir_edit.h ${PROJECT_SOURCE_DIR}/ir/loom_ops.h
  ${PROJECT_SOURCE_DIR}/ir/results.def ${PROJECT_SOURCE_DIR}/ir/ops.def
  ${PROJECT_SOURCE_DIR}/passes/loom_passes.h ${PROJECT_SOURCE_DIR}/passes/loom_pass_switches.h ${PROJECT_SOURCE_DIR}/compiler/loom_compiler.h)
if(LOOM_RUNTIME)
  list(APPEND loom_public_headers ${PROJECT_SOURCE_DIR}/runtime/loom_runtime.h)
endif()
install(FILES ${loom_public_headers} DESTINATION ${CMAKE_INSTALL_INCLUDEDIR}/loom)
install(TARGETS loom_shared loom_static EXPORT loomTargets
        LIBRARY DESTINATION ${CMAKE_INSTALL_LIBDIR}
        ARCHIVE DESTINATION ${CMAKE_INSTALL_LIBDIR})
install(TARGETS loom RUNTIME DESTINATION ${CMAKE_INSTALL_BINDIR})

set(cfgdir ${CMAKE_INSTALL_LIBDIR}/cmake/loom)
install(EXPORT loomTargets NAMESPACE loom:: DESTINATION ${cfgdir})
configure_package_config_file(${PROJECT_SOURCE_DIR}/cmake/loomConfig.cmake.in
  ${PROJECT_BINARY_DIR}/loomConfig.cmake INSTALL_DESTINATION ${cfgdir})
write_basic_package_version_file(${PROJECT_BINARY_DIR}/loomConfigVersion.cmake
  VERSION ${PROJECT_VERSION} COMPATIBILITY SameMajorVersion)
install(FILES ${PROJECT_BINARY_DIR}/loomConfig.cmake ${PROJECT_BINARY_DIR}/loomConfigVersion.cmake
        DESTINATION ${cfgdir})

# pkg-config: a shared link needs -lloom alone; a static one (--static) the
# Vulkan loader (Requires.private) and the rest, in link order.
set(LOOM_PC_REQUIRES "")
set(LOOM_PC_LIBS_PRIVATE "-lpthread")
if(LOOM_RUNTIME)
  set(LOOM_PC_REQUIRES "vulkan")
  string(JOIN " " LOOM_PC_LIBS_PRIVATE ${LOOM_SHADERC_LIBS} -lstdc++ -lm -lpthread)
endif()
file(RELATIVE_PATH LOOM_PC_TO_PREFIX /root/${CMAKE_INSTALL_LIBDIR}/pkgconfig /root)
configure_file(${PROJECT_SOURCE_DIR}/cmake/loom.pc.in ${PROJECT_BINARY_DIR}/loom.pc @ONLY)
install(FILES ${PROJECT_BINARY_DIR}/loom.pc DESTINATION ${CMAKE_INSTALL_LIBDIR}/pkgconfig)

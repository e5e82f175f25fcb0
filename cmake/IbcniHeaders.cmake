# SPDX-License-Identifier: Apache-2.0
# ibcni_component_headers(TARGET PATH...)
# Publishes the headers that TARGET implements (PATH: a folder or a file, relative to the
# repository root) under their own paths ("plugin/modes/attachment_mode.h") in an include directory of
# TARGET's own in the build tree (symbolic links to the sources). A library reaches another's
# headers only by linking it: no include directory hands every component to every other. The
# order within and between libraries is held by scripts/check-layers.sh (plugin/README.md).
function(ibcni_component_headers target)
  set(dir ${CMAKE_BINARY_DIR}/component-headers/${target})
  foreach(path ${ARGN})
    set(src ${PROJECT_SOURCE_DIR}/${path})
    if(IS_DIRECTORY ${src})
      file(GLOB headers RELATIVE ${PROJECT_SOURCE_DIR} CONFIGURE_DEPENDS ${src}/*.h)
    else()
      set(headers ${path})
    endif()
    foreach(h ${headers})
      get_filename_component(parent ${dir}/${h} DIRECTORY)
      file(MAKE_DIRECTORY ${parent})
      file(CREATE_LINK ${PROJECT_SOURCE_DIR}/${h} ${dir}/${h} SYMBOLIC)
    endforeach()
  endforeach()
  target_include_directories(${target} PUBLIC ${dir})
endfunction()

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
    # For ibcni_header_check: which target publishes which header.
    set_property(TARGET ${target} APPEND PROPERTY IBCNI_PUBLISHED_HEADERS ${headers})
  endforeach()
  set_property(GLOBAL APPEND PROPERTY IBCNI_HEADER_PUBLISHERS ${target})
  # An INTERFACE library publishes headers whose sources its users compile themselves.
  get_target_property(type ${target} TYPE)
  if(type STREQUAL "INTERFACE_LIBRARY")
    target_include_directories(${target} INTERFACE ${dir})
  else()
    target_include_directories(${target} PUBLIC ${dir})
  endif()
endfunction()

# ibcni_header_check()
# The target ibcni_header_check (not part of `all`) compiles every production header alone, as a
# file of its own that only includes it ("lib/log/log.h"; include/'s headers as "ibcni/os/netns.h"),
# with the include directories, definitions and options of the target that publishes it (include/'s
# headers: ibcni_base's, which reach include/ and the system only). The unity units of the product
# code (cmake/IbcniUnity.cmake) hide a header that does not include what it uses; this does not.
# A header that no target publishes fails the check (unless no .cpp of its folder is built in this
# tree, as plugin/agent/metrics/ without prometheus-cpp: it is left out). The test header_check
# (label unit) builds the target, going on past a failure so that it names every header that fails.
# A header is compiled again only when it or what it includes changes: the first run takes about
# 100 CPU-seconds (compiling with -fsyntax-only took as long: a header alone generates next to no
# code), a run with nothing changed under a second. Called once every library is defined.
function(ibcni_header_check)
  set(out ${CMAKE_BINARY_DIR}/header-check)
  file(GLOB_RECURSE public RELATIVE ${PROJECT_SOURCE_DIR}/include CONFIGURE_DEPENDS
       ${PROJECT_SOURCE_DIR}/include/*.h)
  set_property(TARGET ibcni_base APPEND PROPERTY IBCNI_HEADER_SPELLINGS ${public})
  get_property(publishers GLOBAL PROPERTY IBCNI_HEADER_PUBLISHERS)
  _ibcni_unpublished_headers(unowned ${publishers})
  add_custom_target(ibcni_header_check)
  set(owners ibcni_base ${publishers})
  list(REMOVE_DUPLICATES owners)
  foreach(owner ${owners})
    get_target_property(headers ${owner} IBCNI_PUBLISHED_HEADERS)
    get_target_property(spellings ${owner} IBCNI_HEADER_SPELLINGS)
    set(sources)
    foreach(h IN LISTS headers spellings)
      if(h)
        file(CONFIGURE OUTPUT ${out}/${owner}/${h}.cpp CONTENT "#include \"${h}\"\n")
        list(APPEND sources ${out}/${owner}/${h}.cpp)
      endif()
    endforeach()
    list(REMOVE_DUPLICATES sources)
    _ibcni_header_check_target(ibcni_header_check_${owner} ${owner} ${sources})
  endforeach()
  if(unowned)
    set(sources)
    foreach(h ${unowned})
      file(CONFIGURE OUTPUT ${out}/unpublished/${h}.cpp
           CONTENT "#error \"${h} is published by no library (ibcni_component_headers)\"\n")
      list(APPEND sources ${out}/unpublished/${h}.cpp)
    endforeach()
    _ibcni_header_check_target(ibcni_header_check_unpublished ibcni_base ${sources})
  endif()
  include(ProcessorCount)
  ProcessorCount(jobs)
  if(CMAKE_GENERATOR MATCHES "Ninja")
    set(keep_going -k 0)
  else()
    set(keep_going -k)
  endif()
  add_test(NAME header_check COMMAND ${CMAKE_COMMAND} --build ${CMAKE_BINARY_DIR} --target ibcni_header_check
           --parallel ${jobs} -- ${keep_going})
  set_tests_properties(header_check PROPERTIES LABELS unit TIMEOUT 600)
endfunction()

# The headers of lib/, ipam/ and plugin/ that none of PUBLISHERS publishes, in the folders of which
# this tree compiles a .cpp.
function(_ibcni_unpublished_headers out)
  file(GLOB_RECURSE headers RELATIVE ${PROJECT_SOURCE_DIR} CONFIGURE_DEPENDS
       ${PROJECT_SOURCE_DIR}/lib/*.h ${PROJECT_SOURCE_DIR}/ipam/*.h ${PROJECT_SOURCE_DIR}/plugin/*.h)
  foreach(publisher ${ARGN})
    get_target_property(published ${publisher} IBCNI_PUBLISHED_HEADERS)
    list(REMOVE_ITEM headers ${published})
  endforeach()
  _ibcni_compiled_folders(folders ${PROJECT_SOURCE_DIR})
  set(unpublished)
  foreach(h ${headers})
    get_filename_component(folder ${PROJECT_SOURCE_DIR}/${h} DIRECTORY)
    if(folder IN_LIST folders)
      list(APPEND unpublished ${h})
    endif()
  endforeach()
  set(${out} ${unpublished} PARENT_SCOPE)
endfunction()

# ibcni_targets_below(OUT DIR): the targets defined in DIR and in its subdirectories, recursively.
function(ibcni_targets_below out dir)
  get_property(targets DIRECTORY ${dir} PROPERTY BUILDSYSTEM_TARGETS)
  get_property(subdirs DIRECTORY ${dir} PROPERTY SUBDIRECTORIES)
  foreach(sub ${subdirs})
    ibcni_targets_below(more ${sub})
    list(APPEND targets ${more})
  endforeach()
  set(${out} ${targets} PARENT_SCOPE)
endfunction()

# The folders of the sources that the targets of DIR and of its subdirectories compile.
function(_ibcni_compiled_folders out dir)
  set(folders)
  ibcni_targets_below(targets ${dir})
  foreach(t ${targets})
    get_target_property(sources ${t} SOURCES)
    get_target_property(base ${t} SOURCE_DIR)
    foreach(s ${sources})
      if(NOT s MATCHES "^\\$<")
        get_filename_component(source ${s} ABSOLUTE BASE_DIR ${base})
        get_filename_component(folder ${source} DIRECTORY)
        list(APPEND folders ${folder})
      endif()
    endforeach()
  endforeach()
  list(REMOVE_DUPLICATES folders)
  set(${out} ${folders} PARENT_SCOPE)
endfunction()

# One object library of the check: SOURCES compiled file by file as OWNER's are (an INTERFACE
# OWNER: as its users' are, with our warnings), without depending on OWNER's build. Our own include
# directories stay ordinary ones (our warnings apply to our headers); the others are system
# directories, as in OWNER.
function(_ibcni_header_check_target name owner)
  add_library(${name} OBJECT EXCLUDE_FROM_ALL ${ARGN})
  set_target_properties(${name} PROPERTIES UNITY_BUILD OFF)
  ibcni_warnings(${name})
  get_target_property(type ${owner} TYPE)
  set(usage)
  if(type STREQUAL "INTERFACE_LIBRARY")
    set(usage INTERFACE_)
  endif()
  string(REGEX REPLACE "([][+.*()^$?|\\\\])" "\\\\\\1" src_re "${PROJECT_SOURCE_DIR}")
  string(REGEX REPLACE "([][+.*()^$?|\\\\])" "\\\\\\1" bin_re "${PROJECT_BINARY_DIR}")
  set(dirs "$<TARGET_PROPERTY:${owner},${usage}INCLUDE_DIRECTORIES>")
  target_include_directories(${name} PRIVATE "$<FILTER:${dirs},INCLUDE,^(${src_re}|${bin_re})/>")
  target_include_directories(${name} SYSTEM PRIVATE "$<FILTER:${dirs},EXCLUDE,^(${src_re}|${bin_re})/>")
  target_compile_definitions(${name} PRIVATE "$<TARGET_PROPERTY:${owner},${usage}COMPILE_DEFINITIONS>")
  target_compile_options(${name} PRIVATE "$<TARGET_PROPERTY:${owner},${usage}COMPILE_OPTIONS>")
  add_dependencies(ibcni_header_check ${name})
endfunction()

# SPDX-License-Identifier: Apache-2.0
# ibcni_kubelet_protos(TARGET)
# A static library of the kubelet's gRPC APIs that ibcni-dra serves: pluginregistration v1 (the
# plugin watcher's handshake) and the DRAPlugin service, v1 and v1beta1. The .proto files are read
# from the k8s.io/kubelet module that tests/upstream/kubelet/go.mod pins, in the Go module cache
# (`go mod download` puts it there; scripts/build-upstream.sh already has), and compiled here with
# Debian's protoc and grpc_cpp_plugin: nothing of them is copied into the repository. The generated
# headers are included by their module path ("k8s.io/kubelet/pkg/apis/dra/v1/api.grpc.pb.h").
# Sets IBCNI_KUBELET_PROTOS_FOUND in the caller's scope; when the module cannot be had, says why.
#
# gRPC (grpc++_unsecure: Unix sockets only), its Abseil, upb, c-ares, re2 and protobuf's lite runtime
# are linked from Debian's static archives: the linker keeps what ibcni-dra calls, and the daemon
# neither maps nor relocates the rest of some 70 shared libraries (its resident set idle: 20.2 MiB
# with the shared ones, 17.9 MiB so), and its image needs none of them.

# IBCNI_GRPC_ARCHIVES: the archives for `pkg-config --static --libs grpc++_unsecure protobuf-lite`
# and what its .pc files leave out (upb, address_sorting, c-ares, re2; zlib, shared), in one link group; empty when
# one is missing.
function(ibcni_grpc_archives)
  set(IBCNI_GRPC_ARCHIVES "" PARENT_SCOPE)
  find_package(PkgConfig REQUIRED)
  find_package(Threads REQUIRED)
  execute_process(COMMAND ${PKG_CONFIG_EXECUTABLE} --static --libs grpc++_unsecure protobuf-lite
                  OUTPUT_VARIABLE flags RESULT_VARIABLE rc OUTPUT_STRIP_TRAILING_WHITESPACE)
  if(NOT rc EQUAL 0)
    message(STATUS "pkg-config knows no grpc++_unsecure or protobuf-lite")
    return()
  endif()
  separate_arguments(flags UNIX_COMMAND "${flags}")
  set(archives)
  set(system)
  foreach(flag ${flags} -lupb -laddress_sorting -lcares -lre2 -lz)
    if(NOT flag MATCHES "^-l(.+)$")
      continue()  # --push-state/--as-needed around -latomic
    endif()
    set(name ${CMAKE_MATCH_1})
    if(name MATCHES "^(atomic|rt|m|pthread|dl|z)$")
      list(APPEND system ${name})
      continue()
    endif()
    find_library(IBCNI_ARCHIVE_${name} NAMES lib${name}.a)
    if(NOT IBCNI_ARCHIVE_${name})
      message(STATUS "lib${name}.a not found: ibcni-dra is not built")
      return()
    endif()
    list(APPEND archives ${IBCNI_ARCHIVE_${name}})
  endforeach()
  list(REMOVE_DUPLICATES archives)
  list(REMOVE_DUPLICATES system)
  set(IBCNI_GRPC_ARCHIVES -Wl,--start-group ${archives} -Wl,--end-group ${system} Threads::Threads PARENT_SCOPE)
endfunction()

function(ibcni_kubelet_protos target)
  set(IBCNI_KUBELET_PROTOS_FOUND FALSE PARENT_SCOPE)
  ibcni_grpc_archives()
  if(NOT IBCNI_GRPC_ARCHIVES)
    return()
  endif()
  # Go 1.26 or newer: the machine's (/usr/local/go) before whatever is first on PATH, which may be
  # Debian's 1.19 (too old for the pins' go.mod).
  find_program(IBCNI_GO go PATHS /usr/local/go/bin NO_DEFAULT_PATH)
  find_program(IBCNI_GO go)
  if(NOT IBCNI_GO)
    message(STATUS "Go not found: the kubelet's protos cannot be read (scripts/install-deps.sh installs Go)")
    return()
  endif()
  set(pins ${PROJECT_SOURCE_DIR}/tests/upstream/kubelet)
  set(go_env ${CMAKE_COMMAND} -E env GOFLAGS=-mod=readonly GOTOOLCHAIN=local)
  execute_process(COMMAND ${go_env} ${IBCNI_GO} mod download k8s.io/kubelet
                  WORKING_DIRECTORY ${pins} RESULT_VARIABLE rc ERROR_VARIABLE err)
  if(rc EQUAL 0)
    execute_process(COMMAND ${go_env} ${IBCNI_GO} list -m -f "{{with .Replace}}{{.Dir}}{{else}}{{.Dir}}{{end}}"
                            k8s.io/kubelet
                    WORKING_DIRECTORY ${pins} RESULT_VARIABLE rc OUTPUT_VARIABLE module_dir ERROR_VARIABLE err
                    OUTPUT_STRIP_TRAILING_WHITESPACE)
  endif()
  if(NOT rc EQUAL 0 OR NOT IS_DIRECTORY "${module_dir}")
    message(STATUS "k8s.io/kubelet (tests/upstream/kubelet/go.mod) is not in the Go module cache and could not "
      "be downloaded: ${err}")
    return()
  endif()
  set(out ${CMAKE_BINARY_DIR}/kubelet-protos)
  set(sources)
  foreach(api pluginregistration/v1 dra/v1 dra/v1beta1)
    set(rel k8s.io/kubelet/pkg/apis/${api}/api)
    # Compiled for protobuf's lite runtime (the daemon needs no reflection or text format): the
    # copy says so. libprotobuf-lite keeps ibcni-dra's resident set about 1.5 MiB smaller than
    # libprotobuf would. configure_file rewrites the copy only when it changes.
    file(READ ${module_dir}/pkg/apis/${api}/api.proto text)
    string(REGEX REPLACE "\n(option go_package)" "\noption optimize_for = LITE_RUNTIME;\n\\1" text "${text}")
    file(WRITE ${out}/proto-staging/${rel}.proto "${text}")
    configure_file(${out}/proto-staging/${rel}.proto ${out}/proto/${rel}.proto COPYONLY)
    set(generated ${out}/gen/${rel}.pb.cc ${out}/gen/${rel}.pb.h ${out}/gen/${rel}.grpc.pb.cc ${out}/gen/${rel}.grpc.pb.h)
    add_custom_command(
      OUTPUT ${generated}
      COMMAND ${CMAKE_COMMAND} -E make_directory ${out}/gen
      COMMAND protobuf::protoc -I ${out}/proto --cpp_out=${out}/gen --grpc_out=${out}/gen
              --plugin=protoc-gen-grpc=$<TARGET_FILE:gRPC::grpc_cpp_plugin> ${rel}.proto
      DEPENDS ${out}/proto/${rel}.proto
      COMMENT "protoc: the kubelet's ${api} API")
    list(APPEND sources ${out}/gen/${rel}.pb.cc ${out}/gen/${rel}.grpc.pb.cc)
  endforeach()
  add_library(${target} STATIC ${sources})
  set_target_properties(${target} PROPERTIES UNITY_BUILD OFF)
  # Generated code: not held to the project's warnings.
  target_include_directories(${target} SYSTEM PUBLIC ${out}/gen)
  target_link_libraries(${target} PUBLIC ${IBCNI_GRPC_ARCHIVES})
  target_compile_definitions(${target} PUBLIC GRPC_USE_PROTO_LITE=1)
  set(IBCNI_KUBELET_PROTOS_FOUND TRUE PARENT_SCOPE)
  message(STATUS "The kubelet's protos: ${module_dir}")
endfunction()

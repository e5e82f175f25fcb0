// SPDX-License-Identifier: Apache-2.0
// The CNI_ARGS parser (cni::parseCniArgs), fed the variable's value as a runtime sets it, and the
// identifier rule of CNI_CONTAINERID and network names.

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

#include "fuzz_util.h"
#include "ibcni/cni/cmd_args.h"
#include "ibcni/cni/error.h"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  using ibcni::fuzz::require;
  const std::string_view text(reinterpret_cast<const char*>(data), size);

  auto args = ibcni::cni::parseCniArgs(text);
  if (args) {
    // Unknown keys are kept only when IgnoreUnknown allowed them.
    require(args->ignoreUnknown || args->unknown.empty(), "kept unknown keys without IgnoreUnknown");
    for (const auto& [k, v] : args->unknown) {
      require(!k.empty() && k.find(';') == std::string::npos && k.find('=') == std::string::npos,
              "an unknown key that is not a key", k);
    }
    for (const auto& ip : args->ips) {
      require(ip.address.valid(), "an IP of no family");
    }
    // Every accepted key came from the text: no value can be longer than it.
    for (const auto* s :
         {&args->mac, &args->guid, &args->podNamespace, &args->podName, &args->podUid, &args->podInfraContainerId}) {
      require(s->size() <= text.size(), "a value longer than CNI_ARGS");
    }
  } else {
    require(args.error().code == ibcni::cni::Errc::kInvalidEnvironment, "CNI_ARGS error with a code other than 4");
  }

  if (ibcni::cni::isValidIdentifier(text)) {
    require(!text.empty() && text.find_first_of("/:; \n") == std::string_view::npos,
            "accepted an identifier with a separator", text);
  }
  return 0;
}

// SPDX-License-Identifier: Apache-2.0
// The result parsers: result::parseResult (what an IPAM delegate printed, in any supported
// version), result::parseError, and prevResult as ADD and CHECK read it from a chained
// configuration (config::parseNetConf -> result::resultFromJson). A result that parses is printed
// in every version and must parse again; printed as 1.1.0 (every field) it must come back equal.

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

#include "fuzz_util.h"
#include "ibcni/cni/cmd_args.h"
#include "ibcni/cni/error.h"
#include "ibcni/cni/spec_version.h"
#include "ibcni/config/net_conf.h"
#include "lib/result/result_json.h"

namespace {

using ibcni::cni::Errc;
using ibcni::cni::SpecVersion;
using ibcni::fuzz::require;

void roundTrip(const ibcni::cni::AddResult& r) {
  for (SpecVersion v : ibcni::cni::kSupportedVersions) {
    const std::string printed = ibcni::result::printResult(r, v);
    auto again = ibcni::result::parseResult(printed, Errc::kInvalidConfig, "reprinted result");
    require(again.has_value(), "a printed result does not parse again",
            again ? std::string_view() : std::string_view(again.error().msg));
    if (v == SpecVersion::k110) {
      require(*again == r, "a result printed as 1.1.0 does not parse back to itself", printed);
    }
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::string_view text(reinterpret_cast<const char*>(data), size);

  // The delegate's stdout.
  if (auto r = ibcni::result::parseResult(text, Errc::kInvalidConfig, "IPAM result"); r) {
    roundTrip(*r);
  } else {
    require(r.error().code == Errc::kInvalidConfig, "parseResult failed with another code than asked");
  }
  (void)ibcni::result::parseError(text);

  // The same text as prevResult of a chained configuration (CHECK requires one; ADD passes it on).
  std::string conf = R"({"cniVersion":"1.0.0","name":"fuzz","type":"ibcni","device":"eth1","prevResult":)";
  conf.append(text);
  conf += "}";
  for (auto command : {ibcni::cni::Command::kAdd, ibcni::cni::Command::kCheck}) {
    auto c = ibcni::config::parseNetConf(conf, command);
    if (c && c->prevResult) {
      roundTrip(*c->prevResult);
    }
  }
  return 0;
}

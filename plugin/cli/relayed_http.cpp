// SPDX-License-Identifier: Apache-2.0
// ibcni-ipam's HTTP client. ibcni-ipam is linked statically, because an exec is all an IPAM
// plugin's ADD costs beyond its own work, and a static program cannot load libcurl: its requests
// (cluster mode's rare block claims, none in the steady state) go to the node agent's relay socket
// when an agent serves it, else to `ibcni http-relay`, started from the directory ibcni-ipam itself
// was run from, where the installer puts both.
#include <climits>
#include <mutex>
#include <optional>
#include <string>
#include <unistd.h>
#include <vector>

#include "lib/http/http_relay.h"
#include "lib/http/relay_socket.h"
#include "plugin/cli/production_http.h"

namespace ibcni::plugin {

namespace {

// <the directory of this executable>/ibcni (the link /proc/self/exe names, so a relative or
// PATH-found start is followed too).
std::string ibcniBesideMe() {
  char self[PATH_MAX];
  const ssize_t n = ::readlink("/proc/self/exe", self, sizeof self - 1);
  std::string dir = n > 0 ? std::string(self, static_cast<std::size_t>(n)) : std::string();
  const auto slash = dir.rfind('/');
  dir = slash == std::string::npos ? std::string(".") : dir.substr(0, slash);
  return dir + "/ibcni";
}

}  // namespace

http::HttpClient& productionHttpClient() {
  // The relays are looked for on the first request, not at start: most runs send none.
  class Lazy final : public http::HttpClient {
   public:
    http::HttpResult<http::Response> send(const http::Request& request) override {
      std::call_once(once_, [this] {
        exec_.emplace(ibcniBesideMe(), std::vector<std::string>{"http-relay"});
        relay_.emplace(http::relaySocketFromEnvironment(), *exec_);
      });
      return relay_->send(request);
    }

   private:
    std::once_flag once_;
    std::optional<http::RelayHttpClient> exec_;
    std::optional<http::SocketRelayHttpClient> relay_;
  };
  static Lazy client;
  return client;
}

}  // namespace ibcni::plugin

// SPDX-License-Identifier: Apache-2.0
#include "faults/node_snapshot.h"

#include <fcntl.h>
#include <sys/file.h>
#include <unistd.h>

#include <algorithm>
#include <fstream>
#include <map>
#include <regex>
#include <sstream>

#include <nlohmann/json.hpp>

#include "ipam/policy/allocator.h"
#include "ipam/store/file_store.h"
#include "ibcni/config/net_conf.h"
#include "support/test_netns.h"

namespace ibcni::faults {

namespace {

using nlohmann::json;

std::string str(const json& j, const char* key, const std::string& fallback = "-") {
  auto it = j.find(key);
  if (it == j.end() || it->is_null()) {
    return fallback;
  }
  return it->is_string() ? it->get<std::string>() : it->dump();
}

json ipJson(const os::Netns& ns, const std::vector<std::string>& args, std::vector<std::string>& out,
            const std::string& label) {
  std::vector<std::string> full{"-j"};
  full.insert(full.end(), args.begin(), args.end());
  auto text = testing::runIp(ns, full);
  if (!text) {
    out.push_back("[" + label + "] ERROR " + text.error().describe());
    return json::array();
  }
  json j = json::parse(*text, nullptr, false);
  return j.is_array() ? j : json::array();
}

void dumpNetns(const std::string& label, const os::Netns& ns, std::vector<std::string>& out) {
  const std::string p = "[" + label + "] ";
  for (const auto& l : ipJson(ns, {"-d", "addr", "show"}, out, label)) {
    bool up = false;
    for (const auto& f : l.value("flags", json::array())) {
      up = up || f == "UP";
    }
    std::string kind = "-";
    if (auto li = l.find("linkinfo"); li != l.end()) {
      kind = str(*li, "info_kind");
    }
    const std::string name = str(l, "ifname");
    out.push_back(p + "link " + name + " index=" + str(l, "ifindex") + " kind=" + kind + " mtu=" + str(l, "mtu") +
                  " mac=" + str(l, "address") + (up ? " up" : " down") + " alias=\"" + str(l, "ifalias", "") + "\"");
    for (const auto& a : l.value("addr_info", json::array())) {
      out.push_back(p + "addr " + name + " " + str(a, "local") + "/" + str(a, "prefixlen") +
                    " scope=" + str(a, "scope"));
    }
  }
  for (const char* family : {"-4", "-6"}) {
    for (const auto& r : ipJson(ns, {family, "route", "show", "table", "all"}, out, label)) {
      out.push_back(p + "route " + str(r, "dst") + " table=" + str(r, "table", "main") +
                    " type=" + str(r, "type", "unicast") + " dev=" + str(r, "dev") + " via=" + str(r, "gateway") +
                    " proto=" + str(r, "protocol") + " scope=" + str(r, "scope") + " metric=" + str(r, "metric") +
                    " src=" + str(r, "prefsrc"));
    }
  }
}

std::string readAll(const fs::path& p) {
  std::ifstream f(p, std::ios::binary);
  std::stringstream ss;
  ss << f.rdbuf();
  return ss.str();
}

// "free" or "HELD": whether another process holds an flock on the file.
std::string lockState(const fs::path& p) {
  int fd = ::open(p.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) {
    return "unreadable";
  }
  const bool free = ::flock(fd, LOCK_EX | LOCK_NB) == 0;
  ::close(fd);
  return free ? "free" : "HELD";
}

std::string oneLine(std::string text) {
  std::replace(text.begin(), text.end(), '\n', ' ');
  std::replace(text.begin(), text.end(), '\r', ' ');
  return text;
}

void dumpStateDir(const fs::path& dir, std::vector<std::string>& out) {
  std::error_code ec;
  for (auto it = fs::recursive_directory_iterator(dir, ec); !ec && it != fs::recursive_directory_iterator();
       it.increment(ec)) {
    const fs::path rel = fs::relative(it->path(), dir);
    if (it->is_directory()) {
      out.push_back("state " + rel.string() + "/");
    } else if (rel == "events") {
      // The call-event ring (plugin/state/call_event_ring.h): the bounded log every invocation
      // appends to, failed and killed ones too, by design; not what an attachment leaves behind.
      continue;
    } else if (it->path().extension() == ".lock") {
      // Lock files stay by design (removing one races with a waiter); a held one is a leftover.
      if (const std::string s = lockState(it->path()); s != "free") {
        out.push_back("state lock " + rel.string() + " " + s);
      }
    } else {
      out.push_back("state file " + rel.string() + " " + oneLine(readAll(it->path())));
    }
  }
}

void dumpStore(const std::string& kind, const fs::path& dir, std::vector<std::string>& out) {
  std::error_code ec;
  for (auto it = fs::recursive_directory_iterator(dir, ec); !ec && it != fs::recursive_directory_iterator();
       it.increment(ec)) {
    const fs::path rel = fs::relative(it->path(), dir);
    const std::string name = rel.string();
    const std::string p = kind + " " + name;
    if (it->is_symlink()) {
      out.push_back(p + " -> " + fs::read_symlink(it->path(), ec).string());
    } else if (it->is_directory()) {
      out.push_back(p + "/");
    } else if (rel.filename() == "lock") {
      if (const std::string s = lockState(it->path()); s != "free") {
        out.push_back(p + " " + s);
      }
    } else if (kind == "host-local" && !name.starts_with("last_reserved_ip")) {
      out.push_back(p + " = " + oneLine(readAll(it->path())));  // a claim: containerID and ifname
    } else {
      out.push_back(p);  // records (framed binary), indexes and cursors: by name
    }
  }
}

}  // namespace

NodeSnapshot& NodeSnapshot::netns(std::string label, const os::Netns& ns) {
  netns_.emplace_back(std::move(label), &ns);
  return *this;
}

NodeSnapshot& NodeSnapshot::stateDir(fs::path dir) {
  stateDirs_.push_back(std::move(dir));
  return *this;
}

NodeSnapshot& NodeSnapshot::ipamStore(std::string kind, fs::path dir) {
  stores_.emplace_back(std::move(kind), std::move(dir));
  return *this;
}

std::string NodeSnapshot::take() const {
  std::vector<std::string> lines;
  for (const auto& [label, ns] : netns_) {
    dumpNetns(label, *ns, lines);
  }
  for (const auto& d : stateDirs_) {
    dumpStateDir(d, lines);
  }
  for (const auto& [kind, dir] : stores_) {
    dumpStore(kind, dir, lines);
  }
  std::sort(lines.begin(), lines.end());
  std::string text;
  for (const auto& l : lines) {
    text += l + "\n";
  }
  return text;
}

std::string lineDiff(const std::string& before, const std::string& after) {
  auto split = [](const std::string& s) {
    std::map<std::string, int> m;
    std::istringstream in(s);
    for (std::string line; std::getline(in, line);) {
      ++m[line];
    }
    return m;
  };
  auto a = split(before);
  auto b = split(after);
  std::string out;
  for (const auto& [line, n] : a) {
    for (int i = b.count(line) ? b[line] : 0; i < n; ++i) {
      out += "- " + line + "\n";
    }
  }
  for (const auto& [line, n] : b) {
    for (int i = a.count(line) ? a[line] : 0; i < n; ++i) {
      out += "+ " + line + "\n";
    }
  }
  return out;
}

std::vector<std::string> temporaryLinks(const os::Netns& ns) {
  static const std::regex temporary("ibc[0-9a-f]{8}");
  std::vector<std::string> out;
  auto text = testing::runIp(ns, {"-j", "link", "show"});
  json j = text ? json::parse(*text, nullptr, false) : json::array();
  for (const auto& l : j.is_array() ? j : json::array()) {
    const std::string name = str(l, "ifname");
    if (std::regex_match(name, temporary)) {
      out.push_back(name);
    }
  }
  return out;
}

bool setSysctl(const os::Netns& ns, const std::string& key, const std::string& value) {
  auto guard = os::NetnsGuard::enter(ns);
  if (!guard) {
    return false;
  }
  std::ofstream f("/proc/sys/" + key);
  f << value;
  f.flush();
  return static_cast<bool>(f);
}

std::vector<std::string> verifyIbcniIpamStore(const std::string& ipamJson, const fs::path& dataDir,
                                              const std::string& network) {
  auto config = ::ibcni::config::parseIpamConfig(ipamJson);
  if (!config) {
    return {"verify: the ipam config does not parse: " + config.error().msg};
  }
  ipam::FileStore store(ipam::FileStore::Options{(dataDir / network).string(), ipam::Allocator::spansOf(*config),
                                                 std::chrono::seconds(10)});
  auto lock = ipam::StoreLock::acquire(store);
  if (!lock) {
    return {"verify: cannot lock the store: " + lock.error().describe()};
  }
  auto problems = store.verify();
  if (!problems) {
    return {"verify: " + problems.error().describe()};
  }
  return *problems;
}

}  // namespace ibcni::faults

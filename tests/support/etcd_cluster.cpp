// SPDX-License-Identifier: Apache-2.0
#include "support/etcd_cluster.h"

#include <fcntl.h>
#include <netinet/in.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <array>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <deque>
#include <filesystem>
#include <fstream>
#include <random>
#include <set>
#include <sstream>
#include <thread>

#include "support/exec_program.h"

namespace ibcni::testing {

namespace {

namespace fs = std::filesystem;
using std::chrono::milliseconds;

// Tuned for loopback: a leader within about a second, and still no spurious elections on a busy
// two-core machine.
constexpr int kHeartbeatMs = 50;
constexpr int kElectionMs = 500;

// True when nothing is bound to 127.0.0.1:port (a bind without SO_REUSEADDR succeeds).
bool portFree(int port) {
  const int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) {
    return false;
  }
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_port = htons(static_cast<std::uint16_t>(port));
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  const bool ok = ::bind(fd, reinterpret_cast<const sockaddr*>(&addr), sizeof addr) == 0;
  ::close(fd);
  return ok;
}

// A free port below the kernel's ephemeral range (so no outgoing connection takes it meanwhile)
// and not in `taken`; 0 when none was found.
int pickPort(std::set<int>& taken) {
  static std::mt19937 rng{std::random_device{}()};
  std::uniform_int_distribution<int> dist(20000, 31999);
  for (int attempt = 0; attempt < 500; ++attempt) {
    const int port = dist(rng);
    if (!taken.contains(port) && portFree(port)) {
      taken.insert(port);
      return port;
    }
  }
  return 0;
}

std::string makeTempDir() {
  std::vector<std::string> bases;
  // A tmpfs makes fsync free (etcd 3.4 has no --unsafe-no-fsync); /dev/shm is one on Linux.
  struct stat st{};
  if (::stat("/dev/shm", &st) == 0 && S_ISDIR(st.st_mode) && ::access("/dev/shm", W_OK) == 0) {
    bases.emplace_back("/dev/shm");
  }
  if (const char* tmp = std::getenv("TMPDIR"); tmp != nullptr && *tmp != '\0') {
    bases.emplace_back(tmp);
  }
  bases.emplace_back("/tmp");
  for (const auto& base : bases) {
    std::string tmpl = base + "/ibcni-etcd.XXXXXX";
    if (::mkdtemp(tmpl.data()) != nullptr) {
      return tmpl;
    }
  }
  return {};
}

}  // namespace

std::optional<std::string> findProgram(std::string_view name) {
  const char* env = std::getenv("PATH");
  std::string path = env != nullptr ? env : std::string(kPathEnv).substr(5);
  std::istringstream dirs(path);
  for (std::string dir; std::getline(dirs, dir, ':');) {
    if (dir.empty() || dir.front() != '/') {
      continue;
    }
    std::string candidate = dir + "/" + std::string(name);
    struct stat st{};
    if (::stat(candidate.c_str(), &st) == 0 && S_ISREG(st.st_mode) && ::access(candidate.c_str(), X_OK) == 0) {
      return candidate;
    }
  }
  return std::nullopt;
}

EtcdCluster::~EtcdCluster() {
  stopAll();
  if (!dir_.empty()) {
    std::error_code ec;
    fs::remove_all(dir_, ec);
  }
}

::testing::AssertionResult EtcdCluster::start(int members, milliseconds timeout) {
  if (!members_.empty()) {
    return ::testing::AssertionFailure() << "EtcdCluster::start: already started";
  }
  if (members < 1) {
    return ::testing::AssertionFailure() << "EtcdCluster::start: " << members << " members";
  }
  const auto etcd = findProgram("etcd");
  const auto etcdctl = findProgram("etcdctl");
  if (!etcd || !etcdctl) {
    return ::testing::AssertionFailure()
           << (etcd ? "etcdctl" : "etcd")
           << " is not installed (not found in PATH): the etcd tests need Debian's etcd-server and etcd-client "
              "3.4 (scripts/install-deps.sh installs them)";
  }
  etcd_ = *etcd;
  etcdctl_ = *etcdctl;
  if (dir_.empty()) {
    dir_ = makeTempDir();
    if (dir_.empty()) {
      return ::testing::AssertionFailure() << "EtcdCluster::start: mkdtemp: " << std::strerror(errno);
    }
  }
  ::testing::AssertionResult result = ::testing::AssertionFailure();
  for (int attempt = 0; attempt < 3; ++attempt) {
    bool portTaken = false;
    result = tryStart(members, timeout, portTaken);
    if (result) {
      return result;
    }
    stopAll();
    members_.clear();
    if (!portTaken) {
      break;
    }
  }
  return result;
}

::testing::AssertionResult EtcdCluster::tryStart(int members, milliseconds timeout, bool& portTaken) {
  std::set<int> taken;
  std::string cluster;
  members_.assign(static_cast<std::size_t>(members), Member{});
  for (int i = 0; i < members; ++i) {
    auto& m = members_[static_cast<std::size_t>(i)];
    m.clientPort = pickPort(taken);
    m.peerPort = pickPort(taken);
    if (m.clientPort == 0 || m.peerPort == 0) {
      return ::testing::AssertionFailure() << "EtcdCluster: no free loopback port found";
    }
    cluster += (i != 0 ? "," : "") + std::string("m") + std::to_string(i) + "=http://127.0.0.1:" +
               std::to_string(m.peerPort);
  }
  // Unique per start: a member of another test's cluster can never join this one.
  const std::string token = "ibcni-test-" + std::to_string(::getpid()) + "-" + std::to_string(std::random_device{}());
  for (int i = 0; i < members; ++i) {
    auto& m = members_[static_cast<std::size_t>(i)];
    const std::string mdir = dir_ + "/m" + std::to_string(i);
    std::error_code ec;
    fs::remove_all(mdir, ec);
    fs::create_directories(mdir, ec);
    if (ec) {
      return ::testing::AssertionFailure() << "EtcdCluster: cannot create " << mdir << ": " << ec.message();
    }
    const std::string client = "http://127.0.0.1:" + std::to_string(m.clientPort);
    const std::string peer = "http://127.0.0.1:" + std::to_string(m.peerPort);
    m.args = {etcd_,
              "--name=m" + std::to_string(i),
              "--data-dir=" + mdir + "/data",
              "--listen-client-urls=" + client,
              "--advertise-client-urls=" + client,
              "--listen-peer-urls=" + peer,
              "--initial-advertise-peer-urls=" + peer,
              "--initial-cluster=" + cluster,
              "--initial-cluster-state=new",
              "--initial-cluster-token=" + token,
              "--heartbeat-interval=" + std::to_string(kHeartbeatMs),
              "--election-timeout=" + std::to_string(kElectionMs),
              "--snapshot-count=5000",
              "--quota-backend-bytes=" + std::to_string(256L * 1024 * 1024),
              "--max-snapshots=2",
              "--max-wals=2",
              "--logger=zap",
              "--log-outputs=stderr"};
  }
  const auto began = Clock::now();
  for (int i = 0; i < members; ++i) {
    if (auto started = startMember(i); !started) {
      return started;
    }
  }
  std::vector<int> all;
  for (int i = 0; i < members; ++i) {
    all.push_back(i);
  }
  auto healthy = checkHealth(all, timeout);
  if (healthy) {
    startupTime_ = Clock::now() - began;
    return healthy;
  }
  for (int i = 0; i < members; ++i) {
    if (readFile(dir_ + "/m" + std::to_string(i) + "/log").find("address already in use") != std::string::npos) {
      portTaken = true;
    }
  }
  return healthy;
}

::testing::AssertionResult EtcdCluster::startMember(int i) {
  if (i < 0 || i >= size()) {
    return ::testing::AssertionFailure() << "EtcdCluster: no member " << i;
  }
  auto& m = members_[static_cast<std::size_t>(i)];
  if (m.pid > 0) {
    return ::testing::AssertionFailure() << "EtcdCluster: member " << i << " already runs (pid " << m.pid << ")";
  }
  const std::string log = dir_ + "/m" + std::to_string(i) + "/log";
  const int logFd = ::open(log.c_str(), O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
  const int nullFd = ::open("/dev/null", O_RDONLY | O_CLOEXEC);
  if (logFd < 0 || nullFd < 0) {
    const int err = errno;
    if (logFd >= 0) {
      ::close(logFd);
    }
    return ::testing::AssertionFailure() << "EtcdCluster: open " << log << ": " << std::strerror(err);
  }
  // A clean environment: ETCD_* variables of the caller would change etcd's configuration.
  const pid_t pid = spawnTiedToTest(m.args, {kPathEnv}, nullFd, logFd, logFd);
  if (pid < 0) {
    const int err = errno;
    ::close(logFd);
    ::close(nullFd);
    return ::testing::AssertionFailure() << "EtcdCluster: fork: " << std::strerror(err);
  }
  ::close(logFd);
  ::close(nullFd);
  m.pid = pid;
  return ::testing::AssertionSuccess();
}

::testing::AssertionResult EtcdCluster::stopMember(int i) {
  if (i < 0 || i >= size()) {
    return ::testing::AssertionFailure() << "EtcdCluster: no member " << i;
  }
  auto& m = members_[static_cast<std::size_t>(i)];
  if (m.pid <= 0) {
    return ::testing::AssertionFailure() << "EtcdCluster: member " << i << " is not running";
  }
  ::kill(m.pid, SIGTERM);
  const auto deadline = Clock::now() + std::chrono::seconds(5);
  int status = 0;
  pid_t r = 0;
  while ((r = ::waitpid(m.pid, &status, WNOHANG)) == 0 && Clock::now() < deadline) {
    std::this_thread::sleep_for(milliseconds(20));
  }
  if (r == 0) {
    ::kill(m.pid, SIGKILL);
    while (::waitpid(m.pid, &status, 0) < 0 && errno == EINTR) {
    }
  }
  m.pid = -1;
  return ::testing::AssertionSuccess();
}

void EtcdCluster::stopAll() {
  for (int i = 0; i < size(); ++i) {
    if (members_[static_cast<std::size_t>(i)].pid > 0) {
      (void)stopMember(i);
    }
  }
}

void EtcdCluster::stop() { stopAll(); }

::testing::AssertionResult EtcdCluster::waitHealthy(milliseconds timeout) {
  std::vector<int> runningMembers;
  for (int i = 0; i < size(); ++i) {
    if (members_[static_cast<std::size_t>(i)].pid > 0) {
      runningMembers.push_back(i);
    }
  }
  if (runningMembers.empty()) {
    return ::testing::AssertionFailure() << "EtcdCluster: no member runs";
  }
  return checkHealth(runningMembers, timeout);
}

::testing::AssertionResult EtcdCluster::checkHealth(const std::vector<int>& which, milliseconds timeout) {
  std::string eps;
  for (int i : which) {
    eps += (eps.empty() ? "" : ",") + endpoint(i);
  }
  const auto deadline = Clock::now() + timeout;
  ProgramRun last;
  for (;;) {
    for (int i : which) {
      auto& m = members_[static_cast<std::size_t>(i)];
      int status = 0;
      if (m.pid > 0 && ::waitpid(m.pid, &status, WNOHANG) == m.pid) {
        m.pid = -1;
        return ::testing::AssertionFailure() << "etcd member " << i << " exited ("
                                             << (WIFEXITED(status) ? "status " + std::to_string(WEXITSTATUS(status))
                                                                   : "signal " + std::to_string(WTERMSIG(status)))
                                             << "); end of its log:\n"
                                             << logTail(i);
      }
    }
    last = runProgram(std::vector<std::string>{etcdctl_, "--endpoints=" + eps, "--dial-timeout=1s",
                                               "--command-timeout=2s", "endpoint", "health"},
                      {kPathEnv, "ETCDCTL_API=3"}, std::nullopt, std::chrono::seconds(10));
    if (last.status == 0) {
      return ::testing::AssertionSuccess();
    }
    if (Clock::now() >= deadline) {
      break;
    }
    std::this_thread::sleep_for(milliseconds(100));
  }
  auto failure = ::testing::AssertionFailure();
  failure << "etcd not healthy after " << timeout.count() << " ms at " << eps << "; etcdctl endpoint health: "
          << last.describe() << "\n";
  for (int i : which) {
    failure << "end of member " << i << "'s log:\n" << logTail(i);
  }
  return failure;
}

bool EtcdCluster::running(int i) const {
  return i >= 0 && i < size() && members_[static_cast<std::size_t>(i)].pid > 0;
}

std::string EtcdCluster::endpoint(int i) const {
  if (i < 0 || i >= size()) {
    return {};
  }
  return "http://127.0.0.1:" + std::to_string(members_[static_cast<std::size_t>(i)].clientPort);
}

std::vector<std::string> EtcdCluster::endpoints() const {
  std::vector<std::string> out;
  for (int i = 0; i < size(); ++i) {
    out.push_back(endpoint(i));
  }
  return out;
}

std::string EtcdCluster::endpointList() const {
  std::string out;
  for (int i = 0; i < size(); ++i) {
    out += (i != 0 ? "," : "") + endpoint(i);
  }
  return out;
}

std::string EtcdCluster::logTail(int i, int lines) const {
  return indentedTail(readFile(dir_ + "/m" + std::to_string(i) + "/log"), lines);
}

}  // namespace ibcni::testing

// SPDX-License-Identifier: Apache-2.0
// The BUILT ibcni, ibcni-ipam and ibcni-agent asked for help (label "binary"; no root needed): each
// help text's content (version, every CNI version the VERSION verb answers, every subcommand, every
// flag), its stream (stderr; stdout stays empty) and exit status (0), usage errors (2, naming the
// argument and the help), and the rule for a plugin run without arguments: help only with stdin a
// terminal and no CNI_* variable; otherwise the CNI call, whose missing CNI_COMMAND is error 4.

#include <fcntl.h>
#include <stdlib.h>
#include <sys/wait.h>
#include <unistd.h>

#include <map>
#include <optional>
#include <regex>
#include <string>
#include <vector>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "support/exec_program.h"

#if !defined(IBCNI_BINARY) || !defined(IBCNI_IPAM_BINARY) || !defined(IBCNI_RELEASE)
#error "IBCNI_BINARY, IBCNI_IPAM_BINARY and IBCNI_RELEASE must be given by the build"
#endif

namespace ibcni::testing {
namespace {

using nlohmann::json;

/// A program and what its help must list: each subcommand with the flags its help must name.
struct Expected {
  std::string path;
  std::string name;
  bool cniPlugin;
  std::map<std::string, std::vector<std::string>> commands;
  std::vector<std::string> flags;  ///< the program's own (ibcni-agent)
};

const std::vector<std::string> kAgentFlags = {"--interval",      "--metrics-listen", "--state-dir", "--ipam-data-dir",
                                              "--pool-index-dir", "--dry-run",        "--once",      "--host-root"};

const Expected kIbcni{IBCNI_BINARY,
                      "ibcni",
                      true,
                      {{"doctor", {"--json", "--config", "--cni-path", "--agent-interval"}},
                       {"reconcile",
                        {"--dry-run", "--json", "--verbose", "--state-dir", "--ipam-data-dir", "--pool-index-dir"}},
                       {"agent", kAgentFlags},
                       {"pools", {"--json"}},
                       {"http-relay", {}},
                       {"version", {}},
                       {"help", {}}},
                      {}};
const Expected kIpam{IBCNI_IPAM_BINARY,
                     "ibcni-ipam",
                     true,
                     {{"gc", {}}, {"pools", {"--json", "--redefine", "--retire"}}, {"forget-node", {}},
                      {"version", {}}, {"help", {}}},
                     {}};

std::vector<Expected> programs() {
  std::vector<Expected> all{kIbcni, kIpam};
#ifdef IBCNI_AGENT_BINARY
  all.push_back({IBCNI_AGENT_BINARY, "ibcni-agent", false, {{"version", {}}, {"help", {}}}, kAgentFlags});
#endif
  return all;
}

ProgramRun run(const Expected& p, std::vector<std::string> args, const std::vector<std::string>& env = {kPathEnv},
               const std::optional<std::string>& input = std::string()) {
  args.insert(args.begin(), p.path);
  return runProgram(args, env, input, std::chrono::seconds(20));
}

/// Runs `path` with no argument, exactly `env`, and a pseudo-terminal as stdin (a person at a shell).
ProgramRun runOnTerminal(const std::string& path, const std::vector<std::string>& env) {
  ProgramRun result;
  const int master = ::posix_openpt(O_RDWR | O_NOCTTY | O_CLOEXEC);
  const bool ready = master >= 0 && ::grantpt(master) == 0 && ::unlockpt(master) == 0;
  const char* slaveName = ready ? ::ptsname(master) : nullptr;
  const int slave = slaveName != nullptr ? ::open(slaveName, O_RDWR | O_NOCTTY | O_CLOEXEC) : -1;
  int out[2] = {-1, -1};
  int err[2] = {-1, -1};
  if (slave < 0 || ::pipe2(out, O_CLOEXEC) != 0 || ::pipe2(err, O_CLOEXEC) != 0) {
    result.err = "cannot make a pseudo-terminal or pipes";
    return result;
  }
  std::vector<char*> envp;
  for (const auto& e : env) {
    envp.push_back(const_cast<char*>(e.c_str()));
  }
  envp.push_back(nullptr);
  char* argv[] = {const_cast<char*>(path.c_str()), nullptr};
  result.started = ProgramRun::Clock::now();
  const pid_t pid = ::fork();
  if (pid == 0) {
    if (::dup2(slave, STDIN_FILENO) < 0 || ::dup2(out[1], STDOUT_FILENO) < 0 || ::dup2(err[1], STDERR_FILENO) < 0) {
      ::_exit(126);
    }
    ::execve(path.c_str(), argv, envp.data());
    ::_exit(127);
  }
  ::close(slave);
  ::close(out[1]);
  ::close(err[1]);
  ChildPipes pipes{-1, out[0], err[0], {}};
  collectChild(pid, pipes, std::chrono::seconds(20), result);
  ::close(master);
  return result;
}

bool contains(const std::string& text, const std::string& part) { return text.find(part) != std::string::npos; }

/// The CNI versions the program's VERSION verb answers, as the help must print them.
std::string versionsLine(const Expected& p) {
  const ProgramRun v = run(p, {}, {kPathEnv, "CNI_COMMAND=VERSION"}, std::string());
  const json answer = json::parse(v.out, nullptr, false);
  std::string line = "CNI protocol versions supported:";
  for (const auto& version : answer.value("supportedVersions", json::array())) {
    line += (line.back() == ':' ? " " : ", ") + version.get<std::string>();
  }
  return line;
}

/// The program's help: first line, CNI versions, every subcommand, every flag of its own.
void expectProgramHelp(const Expected& p, const ProgramRun& r, const std::string& how) {
  EXPECT_EQ(r.status, 0) << how << "\n" << r.describe();
  EXPECT_EQ(r.out, "") << how << ": help goes to stderr\n" << r.describe();
  EXPECT_EQ(r.err.substr(0, r.err.find(':')), p.name + " v" + IBCNI_RELEASE) << how << "\n" << r.describe();
  if (p.cniPlugin) {
    const std::string versions = versionsLine(p);
    EXPECT_TRUE(contains(versions, "1.1.0")) << "the VERSION verb's answer: " << versions;
    EXPECT_TRUE(contains(r.err, "\n" + versions + "\n")) << how << "\n" << r.describe();
  } else {
    EXPECT_FALSE(contains(r.err, "CNI protocol versions")) << how << "\n" << r.describe();
  }
  for (const auto& [command, flags] : p.commands) {
    EXPECT_TRUE(std::regex_search(r.err, std::regex("\n  " + command + " +[a-z]"))) << how << ": " << command
                                                                                    << "\n" << r.describe();
  }
  for (const auto& flag : p.flags) {
    EXPECT_TRUE(contains(r.err, "\n  " + flag + " ")) << how << ": " << flag << "\n" << r.describe();
  }
}

TEST(HelpText, EachProgramsHelpOnStderrWithItsVersionsAndCommands) {
  for (const auto& p : programs()) {
    for (const char* ask : {"--help", "-h", "help"}) {
      expectProgramHelp(p, run(p, {ask}), p.name + " " + ask);
    }
  }
}

TEST(HelpText, EachSubcommandsHelpListsItsFlags) {
  for (const auto& p : programs()) {
    for (const auto& [command, flags] : p.commands) {
      for (const std::vector<std::string>& ask : std::vector<std::vector<std::string>>{
               {command, "--help"}, {command, "-h"}, {"help", command}}) {
        const ProgramRun r = run(p, ask);
        const std::string how = p.name + " " + ask[0] + " " + ask[1];
        EXPECT_EQ(r.status, 0) << how << "\n" << r.describe();
        EXPECT_EQ(r.out, "") << how << "\n" << r.describe();
        EXPECT_TRUE(r.err.starts_with("usage: " + p.name + " " + command)) << how << "\n" << r.describe();
        for (const auto& flag : flags) {
          EXPECT_TRUE(std::regex_search(r.err, std::regex("\n  " + flag + "( [A-Z:\\[\\].]+)?  +[a-z\"]")))
              << how << ": flag " << flag << " on a line of its own\n" << r.describe();
        }
        EXPECT_TRUE(contains(r.err, "\n  -h, --help ")) << how << "\n" << r.describe();
      }
    }
  }
}

TEST(HelpText, UnknownSubcommandOrFlagExitsTwoNamingIt) {
  for (const auto& p : programs()) {
    ProgramRun r = run(p, {"bogus-command"});
    EXPECT_EQ(r.status, 2) << r.describe();
    EXPECT_EQ(r.out, "") << r.describe();
    EXPECT_TRUE(contains(r.err, p.name + ": unknown subcommand \"bogus-command\"")) << r.describe();
    EXPECT_TRUE(contains(r.err, "`" + p.name + (p.cniPlugin ? " help`" : " --help`"))) << r.describe();
    r = run(p, {"--bogus-flag"});
    EXPECT_EQ(r.status, 2) << r.describe();
    EXPECT_TRUE(contains(r.err, p.name + ": unknown flag \"--bogus-flag\"")) << r.describe();
    r = run(p, {"help", "bogus-command"});
    EXPECT_EQ(r.status, 2) << r.describe();
    EXPECT_TRUE(contains(r.err, "unknown subcommand \"bogus-command\"")) << r.describe();
    for (const auto& [command, flags] : p.commands) {
      if (command == "help") {
        continue;  // `help --bogus-flag`: the same refusal, tested above through the program
      }
      r = run(p, {command, "--bogus-flag"});
      EXPECT_EQ(r.status, 2) << command << "\n" << r.describe();
      EXPECT_TRUE(contains(r.err, p.name + " " + command + ": unknown flag \"--bogus-flag\"")) << r.describe();
      EXPECT_TRUE(contains(r.err, "`" + p.name + " " + command + " --help`")) << r.describe();
    }
  }
}

TEST(HelpText, VersionLineKeepsItsFormat) {
  for (const auto& p : programs()) {
    for (const char* ask : {"version", "--version"}) {
      const ProgramRun r = run(p, {ask});
      EXPECT_EQ(r.status, 0) << r.describe();
      EXPECT_TRUE(std::regex_match(r.out, std::regex(p.name + " " + IBCNI_RELEASE +
                                                     " \\(CNI spec( [0-9]+\\.[0-9]+\\.[0-9]+)+\\)\n")))
          << "the installer compares this line\n" << r.describe();
    }
  }
}

/// A CNI call's error: exit 1, the error object on stdout with code 4 naming CNI_COMMAND.
void expectMissingCommand(const ProgramRun& r, const std::string& how) {
  EXPECT_EQ(r.status, 1) << how << "\n" << r.describe();
  const json e = json::parse(r.out, nullptr, false);
  EXPECT_EQ(e.value("code", 0), 4) << how << "\n" << r.describe();
  EXPECT_TRUE(contains(e.value("msg", ""), "CNI_COMMAND")) << how << "\n" << r.describe();
  EXPECT_FALSE(contains(r.err, "usage:")) << how << ": no help for a runtime\n" << r.describe();
}

TEST(HelpText, WithoutArgumentsHelpOnlyForAPersonAtATerminal) {
  for (const auto& p : programs()) {
    if (!p.cniPlugin) {
      continue;
    }
    const ProgramRun r = runOnTerminal(p.path, {kPathEnv, "HOME=/root"});
    if (r.err == "cannot make a pseudo-terminal or pipes") {
      GTEST_SKIP() << r.err;
    }
    expectProgramHelp(p, r, p.name + " on a terminal");
    for (const char* cni : {"CNI_CONTAINERID=abc", "CNI_PATH=", "CNI_IFNAME=net1", "CNI_NETNS=/run/netns/x"}) {
      expectMissingCommand(runOnTerminal(p.path, {kPathEnv, cni}), p.name + " on a terminal with " + cni);
    }
    expectMissingCommand(run(p, {}, {kPathEnv}, std::string(R"({"cniVersion":"1.0.0","name":"n"})")),
                         p.name + " with a configuration piped in");
    expectMissingCommand(run(p, {}, {kPathEnv}, std::nullopt), p.name + " with stdin closed");
    expectMissingCommand(run(p, {}, {kPathEnv, "CNI_CONTAINERID=abc", "CNI_IFNAME=net1"}),
                         p.name + " with CNI variables but no CNI_COMMAND");
  }
}

TEST(HelpText, ACniCallStillReachesThePlugin) {
  for (const auto& p : programs()) {
    if (!p.cniPlugin) {
      continue;
    }
    const ProgramRun r = run(p, {}, {kPathEnv, "CNI_COMMAND=VERSION"}, std::string());
    EXPECT_EQ(r.status, 0) << r.describe();
    const json answer = json::parse(r.out, nullptr, false);
    EXPECT_TRUE(answer.contains("supportedVersions")) << r.describe();
  }
}

}  // namespace
}  // namespace ibcni::testing

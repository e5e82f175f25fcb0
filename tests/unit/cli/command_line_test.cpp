// SPDX-License-Identifier: Apache-2.0
// plugin/cli/command_line: a program's table parsed, dispatched and rendered as help; the rule that
// decides between the help and a CNI call when a plugin runs without arguments. The real tables
// of ibcni, ibcni-ipam and ibcni-agent are checked through the built executables
// (tests/integration/help_text_test.cpp).
#include "plugin/cli/command_line.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "ibcni/cni/spec_version.h"
#include "lib/version/version.h"

namespace ibcni::plugin {
namespace {

constexpr Flag kJson{"--json", "", "print JSON"};
constexpr Flag kDir{"--dir", "DIR", "a directory", true};
constexpr Flag kConfig{"--config", "FILE", "a config file"};
constexpr Flag kToolFlags[] = {kJson, kDir, kConfig};

int lastRun = 0;  // which row's run was called (1: tool, 2: other), and with what
CommandLine lastLine;

int runTool(const CommandLine& line) {
  lastRun = 1;
  lastLine = line;
  return 0;
}
int runOther(const CommandLine& line) {
  lastRun = 2;
  lastLine = line;
  return 7;
}

constexpr Subcommand kRows[] = {
    {.name = "tool",
     .summary = "does the tool's thing",
     .operands = "CONFIG_FILE [NAME]",
     .minOperands = 1,
     .maxOperands = 2,
     .flags = kToolFlags,
     .details = "exit status: 0 done\n",
     .run = &runTool},
    {.name = "other", .summary = "does another thing", .run = &runOther},
    kVersionCommand,
    kHelpCommand,
};

const Program kPlugin{.name = "prog", .about = "a test program", .cniPlugin = true, .commands = kRows};

// Arguments as main() gets them, kept alive for the test.
struct Argv {
  explicit Argv(std::vector<std::string> args) : strings(std::move(args)) {
    for (auto& s : strings) {
      pointers.push_back(s.data());
    }
    pointers.push_back(nullptr);
  }
  [[nodiscard]] int argc() const { return static_cast<int>(strings.size()); }
  [[nodiscard]] char** argv() { return pointers.data(); }
  [[nodiscard]] std::span<char* const> tail(std::size_t from) const {
    return {pointers.data() + from, strings.size() - from};
  }
  std::vector<std::string> strings;
  std::vector<char*> pointers;
};

std::expected<CommandLine, UsageProblem> parseTool(std::vector<std::string> args) {
  Argv a(std::move(args));
  return parseCommandLine(kPlugin, &kRows[0], a.tail(0));
}

TEST(ParseCommandLine, TakesFlagsValuesAndOperandsFromTheTable) {
  auto line = parseTool({"--json", "--dir", "a", "conf.json", "--dir", "", "--config", "-h", "name"});
  ASSERT_TRUE(line) << line.error().what;
  EXPECT_TRUE(line->has(kJson));
  EXPECT_EQ(line->values(kDir), (std::vector<std::string>{"a", ""}));
  EXPECT_EQ(line->value(kConfig), "-h") << "a flag's value is the next argument, whatever it is";
  EXPECT_EQ(line->operands, (std::vector<std::string>{"conf.json", "name"}));
  EXPECT_FALSE(line->helpAsked);
  EXPECT_EQ(line->args.size(), 9u);
}

TEST(ParseCommandLine, RefusesWhatTheTableDoesNotSay) {
  auto problem = [](std::vector<std::string> args) {
    auto line = parseTool(std::move(args));
    return line ? std::string("(accepted)") : line.error().what;
  };
  EXPECT_EQ(problem({"conf", "--bogus"}), "unknown flag \"--bogus\"");
  EXPECT_EQ(problem({"conf", "--json", "--json"}), "--json given twice");
  EXPECT_EQ(problem({"conf", "--config"}), "--config needs its FILE");
  EXPECT_EQ(problem({}), "missing CONFIG_FILE [NAME]");
  EXPECT_EQ(problem({"a", "b", "c"}), "unexpected argument \"c\"");
  EXPECT_EQ(problem({"conf", "-x"}), "unknown flag \"-x\"");
}

TEST(ParseCommandLine, StopsAtHelp) {
  for (const char* help : {"--help", "-h"}) {
    auto line = parseTool({"--bogus-after", help});
    EXPECT_FALSE(line) << "flags before the help are still checked";
    line = parseTool({help, "--bogus"});
    ASSERT_TRUE(line) << line.error().what;
    EXPECT_TRUE(line->helpAsked);
  }
}

TEST(FindSubcommand, NamesAndAliases) {
  EXPECT_EQ(findSubcommand(kPlugin, "tool"), &kRows[0]);
  EXPECT_EQ(findSubcommand(kPlugin, "--help")->name, "help");
  EXPECT_EQ(findSubcommand(kPlugin, "-h")->name, "help");
  EXPECT_EQ(findSubcommand(kPlugin, "--version")->name, "version");
  EXPECT_EQ(findSubcommand(kPlugin, "tools"), nullptr);
  EXPECT_EQ(findSubcommand(kPlugin, ""), nullptr);
}

bool contains(const std::string& text, const std::string& part) { return text.find(part) != std::string::npos; }

TEST(ProgramHelp, SaysWhatItIsItsVersionsAndEveryCommand) {
  const std::string help = programHelp(kPlugin);
  EXPECT_EQ(help.substr(0, help.find('\n')), "prog v" + std::string(releaseVersion()) + ": a test program");
  std::string versions = "CNI protocol versions supported: ";
  for (std::size_t i = 0; i < cni::kSupportedVersions.size(); ++i) {
    versions += std::string(i == 0 ? "" : ", ") + std::string(cni::toString(cni::kSupportedVersions[i]));
  }
  EXPECT_TRUE(contains(help, "\n" + versions + "\n")) << help;
  for (const Subcommand& c : kRows) {
    EXPECT_TRUE(contains(help, "\n  " + std::string(c.name) + " ")) << c.name << "\n" << help;
    EXPECT_TRUE(contains(help, std::string(c.summary) + "\n")) << c.name << "\n" << help;
  }
  EXPECT_TRUE(contains(help, "`prog help COMMAND`")) << help;
}

TEST(ProgramHelp, NoCniVersionsForAProgramThatIsNoPlugin) {
  const Program agent{.name = "agent", .about = "not a plugin", .commands = kRows, .flags = kToolFlags};
  const std::string help = programHelp(agent);
  EXPECT_FALSE(contains(help, "CNI protocol versions")) << help;
  EXPECT_TRUE(contains(help, "\n  --dir DIR      a directory; repeatable\n")) << help;
}

TEST(CommandHelp, UsageEveryFlagOnOneLineAndTheDetails) {
  const std::string help = commandHelp(kPlugin, kRows[0]);
  EXPECT_EQ(help.substr(0, help.find('\n')), "usage: prog tool [FLAGS] CONFIG_FILE [NAME]");
  EXPECT_TRUE(contains(help, "\n  does the tool's thing\n")) << help;
  EXPECT_TRUE(contains(help, "\n  --json         print JSON\n")) << help;
  EXPECT_TRUE(contains(help, "\n  --dir DIR      a directory; repeatable\n")) << help;
  EXPECT_TRUE(contains(help, "\n  --config FILE  a config file\n")) << help;
  EXPECT_TRUE(contains(help, "\n  -h, --help     print this help\n")) << help;
  EXPECT_TRUE(help.ends_with("\nexit status: 0 done\n")) << help;
}

TEST(HelpWithoutArguments, OnlyAPersonAtATerminalWithNoCniVariable) {
  const char* none[] = {"PATH=/bin", "HOME=/root", "XCNI_COMMAND=x", nullptr};
  EXPECT_TRUE(helpWithoutArguments(none, true));
  EXPECT_TRUE(helpWithoutArguments(nullptr, true));
  EXPECT_FALSE(helpWithoutArguments(none, false)) << "stdin not a terminal: a runtime's call";
  for (const char* cni : {"CNI_COMMAND=ADD", "CNI_CONTAINERID=abc", "CNI_PATH=", "CNI_NETNS=/run/netns/x", "CNI_X=1"}) {
    const char* env[] = {"PATH=/bin", cni, nullptr};
    EXPECT_FALSE(helpWithoutArguments(env, true)) << cni << ": a runtime's call, whose error is the CNI error 4";
  }
}

// runCommandLine with its stderr captured.
struct Ran {
  int status;
  std::string err;
};
Ran run(const Program& program, std::vector<std::string> args) {
  Argv a(std::move(args));
  lastRun = 0;
  ::testing::internal::CaptureStderr();
  const int status = runCommandLine(program, a.argc(), a.argv(), [](const CommandLine&) { return 42; });
  return {status, ::testing::internal::GetCapturedStderr()};
}

TEST(RunCommandLine, DispatchesToTheRowWithItsParsedLine) {
  EXPECT_EQ(run(kPlugin, {"prog", "tool", "conf", "--json"}).status, 0);
  EXPECT_EQ(lastRun, 1);
  EXPECT_EQ(lastLine.command, &kRows[0]);
  EXPECT_EQ(lastLine.program, &kPlugin);
  EXPECT_EQ(lastLine.operands, std::vector<std::string>{"conf"});
  EXPECT_EQ(run(kPlugin, {"prog", "other"}).status, 7);
  EXPECT_EQ(lastRun, 2);
}

TEST(RunCommandLine, HelpOnStderrExitZero) {
  for (auto args : std::vector<std::vector<std::string>>{{"prog", "help"}, {"prog", "--help"}, {"prog", "-h"}}) {
    const Ran r = run(kPlugin, args);
    EXPECT_EQ(r.status, 0) << args[1];
    EXPECT_EQ(r.err, programHelp(kPlugin)) << args[1];
  }
  for (auto args : std::vector<std::vector<std::string>>{
           {"prog", "tool", "--help"}, {"prog", "tool", "-h"}, {"prog", "help", "tool"}, {"prog", "tool", "x", "-h"}}) {
    const Ran r = run(kPlugin, args);
    EXPECT_EQ(r.status, 0) << args.back();
    EXPECT_EQ(r.err, commandHelp(kPlugin, kRows[0])) << args.back();
    EXPECT_EQ(lastRun, 0) << "help runs nothing";
  }
}

TEST(RunCommandLine, UsageErrorsExitTwoNamingTheArgumentAndTheHelp) {
  Ran r = run(kPlugin, {"prog", "tol"});
  EXPECT_EQ(r.status, 2);
  EXPECT_TRUE(contains(r.err, "prog: unknown subcommand \"tol\"")) << r.err;
  EXPECT_TRUE(contains(r.err, "`prog help`")) << r.err;
  r = run(kPlugin, {"prog", "--tool"});
  EXPECT_EQ(r.status, 2);
  EXPECT_TRUE(contains(r.err, "prog: unknown flag \"--tool\"")) << r.err;
  r = run(kPlugin, {"prog", "tool", "conf", "--bogus"});
  EXPECT_EQ(r.status, 2);
  EXPECT_TRUE(contains(r.err, "prog tool: unknown flag \"--bogus\"\nusage: prog tool [FLAGS] CONFIG_FILE [NAME]\n"))
      << r.err;
  EXPECT_TRUE(contains(r.err, "`prog tool --help`")) << r.err;
  r = run(kPlugin, {"prog", "help", "nope"});
  EXPECT_EQ(r.status, 2);
  EXPECT_TRUE(contains(r.err, "unknown subcommand \"nope\"")) << r.err;
  r = run(kPlugin, {"prog", "version", "extra"});
  EXPECT_EQ(r.status, 2);
  EXPECT_EQ(lastRun, 0) << "no row runs after a usage error";
}

TEST(RunCommandLine, AProgramWithFlagsOfItsOwnParsesThemWithoutASubcommand) {
  const Program agent{.name = "agent", .about = "not a plugin", .commands = kRows, .flags = kToolFlags};
  Argv a({"agent", "--dir", "d", "--json"});
  CommandLine seen;
  const int status = runCommandLine(agent, a.argc(), a.argv(), [&seen](const CommandLine& line) {
    seen = line;
    return 5;
  });
  EXPECT_EQ(status, 5);
  EXPECT_EQ(seen.command, nullptr);
  EXPECT_EQ(seen.values(kDir), std::vector<std::string>{"d"});
  EXPECT_TRUE(seen.has(kJson));
  EXPECT_EQ(run(agent, {"agent"}).status, 42) << "no argument: the program itself";
  const Ran r = run(agent, {"agent", "--bogus"});
  EXPECT_EQ(r.status, 2);
  EXPECT_TRUE(contains(r.err, "agent: unknown flag \"--bogus\"")) << r.err;
  EXPECT_TRUE(contains(r.err, "`agent --help`")) << r.err;
}

}  // namespace
}  // namespace ibcni::plugin

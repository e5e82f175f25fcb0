// SPDX-License-Identifier: Apache-2.0
// The command lines of ibcni, ibcni-ipam and ibcni-agent. Each program is one table (Program): its
// subcommands, each with a one-line summary, its operands and its flags (one line each). The
// dispatch (runCommandLine) and every help and usage text are made from that table and from nothing
// else, so a subcommand or a flag added to it is both accepted and listed.
//
// Help goes to stderr, whether asked for (`help`, `--help`, `-h`, `COMMAND --help`) or shown to a
// person who ran a CNI plugin by hand: stdout carries only what a program answers (the CNI
// protocol's JSON, reports, the version line). Exit status 0 for help, 2 for a usage error.
#pragma once

#include <expected>
#include <functional>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace ibcni::plugin {

/// One flag, as its help lists it.
struct Flag {
  std::string_view name = {};   ///< "--json"
  std::string_view value = {};  ///< its value's placeholder ("FILE"); empty for a switch
  std::string_view help = {};   ///< one line
  bool repeatable = false;   ///< may be given more than once (each value kept); otherwise twice is a usage error
};

struct CommandLine;

/// One subcommand: `PROGRAM NAME [FLAGS] OPERANDS`.
struct Subcommand {
  std::string_view name = {};
  std::string_view summary = {};   ///< one line, in the program's list and under the usage line
  std::string_view operands = {};  ///< as the usage line shows them ("CONFIG_FILE NODE"); empty for none
  int minOperands = 0;
  int maxOperands = 0;
  std::span<const Flag> flags = {};
  std::string_view details = {};  ///< lines after the flags (at length, exit statuses); each ends with '\n'
  int (*run)(const CommandLine&) = nullptr;  ///< its exit status
};

/// One program's table.
struct Program {
  std::string_view name = {};   ///< as usage lines show it ("ibcni"; the fault-injection build gives its own)
  std::string_view about = {};  ///< one line: what it is
  /// Without arguments it is a CNI plugin (CNI_COMMAND and the network configuration on stdin):
  /// its help then names the CNI versions it speaks.
  bool cniPlugin = false;
  std::span<const Subcommand> commands = {};
  std::span<const Flag> flags = {};  ///< its own flags, without a subcommand (ibcni-agent); empty: none
  std::string_view details = {};     ///< lines after the flags; each ends with '\n'
};

/// An invocation parsed against its program's table.
struct CommandLine {
  const Program* program = nullptr;
  const Subcommand* command = nullptr;  ///< nullptr: the program without a subcommand
  std::vector<std::pair<std::string_view, std::string>> flags = {};  ///< each flag given (the table's name), its value
  std::vector<std::string> operands = {};
  std::vector<std::string> args = {};  ///< the arguments after the subcommand's name, as given
  bool helpAsked = false;              ///< --help or -h was among them

  [[nodiscard]] bool has(const Flag& flag) const;
  /// The flag's value; nullopt when it was not given.
  [[nodiscard]] std::optional<std::string> value(const Flag& flag) const;
  /// Every value of a repeatable flag, in order.
  [[nodiscard]] std::vector<std::string> values(const Flag& flag) const;
};

/// What is wrong with a command line, in a few words naming the argument ("unknown flag \"--x\"").
struct UsageProblem {
  std::string what;
};

/// Parses `args` (those after the subcommand's name; all of them when `command` is nullptr) against
/// the flags and operand counts of `command` (or the program's own flags). Stops at --help or -h
/// (helpAsked). A flag's value is the argument after it, whatever it is.
[[nodiscard]] std::expected<CommandLine, UsageProblem> parseCommandLine(const Program& program,
                                                                        const Subcommand* command,
                                                                        std::span<char* const> args);

/// The subcommand `name` names ("--help"/"-h" name help, "--version" names version); nullptr when none.
[[nodiscard]] const Subcommand* findSubcommand(const Program& program, std::string_view name);

/// The program's help: what it is and its version (for a CNI plugin, the CNI protocol versions it
/// speaks, as the reference plugins print them), usage, each subcommand with its summary, its flags.
[[nodiscard]] std::string programHelp(const Program& program);

/// A subcommand's help: usage line, summary, each flag with one line, details.
[[nodiscard]] std::string commandHelp(const Program& program, const Subcommand& command);

/// Says `problem` on stderr with the usage line and where the help is. @return 2
[[nodiscard]] int usageError(const Program& program, const Subcommand* command, std::string_view problem);

/// Whether a CNI plugin run with no argument shows its help. The rule, help or CNI call:
///  - arguments decide first: `help`, `--help`, `-h` (and `COMMAND --help`) always print help, and
///    any argument that names no subcommand is a usage error (exit 2), whatever the environment;
///    runtimes never pass arguments (libcni execs the plugin with its path alone);
///  - with no argument, help only when no variable named CNI_* is in the environment (set, even
///    empty) AND stdin is a terminal. Otherwise it is a CNI call, and one without CNI_COMMAND fails
///    with the CNI error 4 on stdout, exit 1, as before (runMain does not wait for a configuration
///    typed at a terminal then).
/// The reference skel prints its "about" text on stderr and exits 0 whenever CNI_COMMAND is unset;
/// a runtime that lost CNI_COMMAND but set the other variables (or piped a configuration) would then
/// read success from an empty stdout, so this rule is stricter: it needs both signs of a person.
/// @param environment  the process environment (NAME=value entries, ended by nullptr; nullptr: empty)
[[nodiscard]] bool helpWithoutArguments(const char* const* environment, bool stdinIsTerminal);

/// main() over a program's table. With no argument: the program's help on stderr when
/// helpWithoutArguments says so for a CNI plugin, else `withoutSubcommand`. With a subcommand (or,
/// for a program with flags of its own, a flag first): its parsed command line to its run, or to
/// `withoutSubcommand`; --help/-h: that help, exit 0. An unknown subcommand or flag: exit 2, naming
/// it and pointing to the help. A CNI call has no argument, so it always reaches `withoutSubcommand`.
[[nodiscard]] int runCommandLine(const Program& program, int argc, char** argv,
                                 const std::function<int(const CommandLine&)>& withoutSubcommand);

/// `PROGRAM help [COMMAND]`: the program's help, or that command's, on stderr.
[[nodiscard]] int runHelpCommand(const CommandLine& line);

/// `PROGRAM version`: versionLine (lib/version/version.h) on stdout, the one line the installer compares.
[[nodiscard]] int runVersionCommand(const CommandLine& line);

/// The help and version rows every program's table ends with.
inline constexpr Subcommand kVersionCommand{
    .name = "version",
    .summary = "print one line: the release and the CNI spec versions (also --version)",
    .run = &runVersionCommand};
inline constexpr Subcommand kHelpCommand{
    .name = "help",
    .summary = "print this help, or COMMAND's usage and flags (also --help, -h)",
    .operands = "[COMMAND]",
    .maxOperands = 1,
    .run = &runHelpCommand};

}  // namespace ibcni::plugin

// Running other programs: a shell command whose output is captured (the kernel compiler, an
// artifact's build.sh, the onnxruntime peer of `korch bench`), and a child process spoken to line
// by line through pipes (the PyTorch peers of `korch bench`, bench/gpu_peers.py --serve).
#pragma once

#include <sys/types.h>

#include <optional>
#include <string>
#include <vector>

namespace korch {

// Runs `cmd` through /bin/sh with stderr joined to stdout; appends the output to *output and
// returns the exit status (128 when the command died of a signal). Throws korch::Error (kIo) when
// no shell can be started.
int run_shell(const std::string& cmd, std::string* output);

// `s` as one single-quoted shell word.
std::string shell_quote(const std::string& s);

// A child process with a pipe to its stdin and one from its stdout, its stderr appended to a file
// (so what it said when it failed can be quoted). Lines go in with write_line() and come back
// with read_line(), which never waits longer than it is told: a child that dies or stops answering
// is reported, not waited for. The destructor ends a child still running (stdin closed, then
// SIGTERM, then SIGKILL) and reaps it. One thread at a time.
class ChildProcess {
 public:
  // Starts argv[0] (searched in PATH) with `argv`. Throws korch::Error (kIo) when it cannot be
  // started (no such program, no pipes, `stderr_file` cannot be opened).
  ChildProcess(const std::vector<std::string>& argv, const std::string& stderr_file);
  ~ChildProcess();
  ChildProcess(const ChildProcess&) = delete;
  ChildProcess& operator=(const ChildProcess&) = delete;

  // Writes `line` and a newline to the child's stdin. False (and *why set) when the child no
  // longer reads it (it exited or closed its stdin).
  bool write_line(const std::string& line, std::string* why);
  // The next line the child prints, without its newline. Nothing when no line comes within
  // `timeout_s` seconds (*why: "no answer in N s"; the child is left running, end() it) or the
  // child closed its stdout or exited (*why: how it ended, e.g. "exited with status 1").
  std::optional<std::string> read_line(double timeout_s, std::string* why);
  // Ends the child: closes its stdin, gives it `grace_s` seconds to exit, then SIGTERM, then
  // SIGKILL. Returns how it ended ("exited with status 0", "killed by signal 9"). Idempotent.
  std::string end(double grace_s = 5);
  // Whether the child is still running (reaps it if it has exited).
  bool running();
  pid_t pid() const { return pid_; }

 private:
  bool reap(bool block);  // true once the child has been reaped (status_ set)
  std::string how_it_ended() const;

  pid_t pid_ = -1;
  int in_fd_ = -1, out_fd_ = -1;  // our ends: the child's stdin, its stdout
  bool reaped_ = false;
  int status_ = 0;
  std::string buffer_;  // read from stdout, not yet returned as a line
  bool out_closed_ = false;
};

}  // namespace korch

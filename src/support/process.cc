#include "support/process.h"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <thread>

#include "support/clock.h"
#include "support/error.h"

extern char** environ;

namespace korch {

int run_shell(const std::string& cmd, std::string* output) {
  FILE* p = popen((cmd + " 2>&1").c_str(), "r");
  if (!p) fail_io("cannot start: {}", cmd);
  char buf[4096];
  size_t n;
  while ((n = fread(buf, 1, sizeof buf, p)) > 0) output->append(buf, n);
  int status = pclose(p);
  return WIFEXITED(status) ? WEXITSTATUS(status) : 128;
}

std::string shell_quote(const std::string& s) {
  std::string out = "'";
  for (char c : s) out += c == '\'' ? std::string("'\\''") : std::string(1, c);
  return out + "'";
}

namespace {

void close_fd(int& fd) {
  if (fd >= 0) close(fd);
  fd = -1;
}

}  // namespace

ChildProcess::ChildProcess(const std::vector<std::string>& argv, const std::string& stderr_file) {
  if (argv.empty()) fail_io("ChildProcess: no program given");
  int in[2], out[2];
  // Close-on-exec: the child keeps only the copies dup2'ed onto 0 and 1, not our ends.
  if (pipe2(in, O_CLOEXEC) != 0) fail_io("cannot make a pipe for {}: {}", argv[0], std::strerror(errno));
  if (pipe2(out, O_CLOEXEC) != 0) {
    close(in[0]), close(in[1]);
    fail_io("cannot make a pipe for {}: {}", argv[0], std::strerror(errno));
  }
  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  posix_spawn_file_actions_adddup2(&actions, in[0], 0);
  posix_spawn_file_actions_adddup2(&actions, out[1], 1);
  posix_spawn_file_actions_addopen(&actions, 2, stderr_file.empty() ? "/dev/null" : stderr_file.c_str(),
                                   O_WRONLY | O_CREAT | O_APPEND, 0644);
  std::vector<char*> args;
  for (const std::string& a : argv) args.push_back(const_cast<char*>(a.c_str()));
  args.push_back(nullptr);
  // glibc's posix_spawnp reports a failed exec (and a failed open of stderr_file) as its result.
  const int rc = posix_spawnp(&pid_, argv[0].c_str(), &actions, nullptr, args.data(), environ);
  posix_spawn_file_actions_destroy(&actions);
  close(in[0]), close(out[1]);
  in_fd_ = in[1], out_fd_ = out[0];
  if (rc != 0) {
    close_fd(in_fd_), close_fd(out_fd_);
    pid_ = -1;
    fail_io("cannot start {} (stderr to {}): {}", argv[0], stderr_file.empty() ? "/dev/null" : stderr_file,
            std::strerror(rc));
  }
}

ChildProcess::~ChildProcess() { end(2); }

bool ChildProcess::reap(bool block) {
  if (reaped_ || pid_ < 0) return true;
  int status = 0;
  pid_t r;
  do r = waitpid(pid_, &status, block ? 0 : WNOHANG);
  while (r < 0 && errno == EINTR);
  if (r == pid_ || r < 0) {  // r < 0: not our child any more (ECHILD); nothing left to wait for
    reaped_ = true;
    status_ = r == pid_ ? status : 0;
  }
  return reaped_;
}

bool ChildProcess::running() { return !reap(false); }

std::string ChildProcess::how_it_ended() const {
  if (WIFSIGNALED(status_)) return fmt::format("killed by signal {} ({})", WTERMSIG(status_), strsignal(WTERMSIG(status_)));
  return fmt::format("exited with status {}", WEXITSTATUS(status_));
}

bool ChildProcess::write_line(const std::string& line, std::string* why) {
  if (in_fd_ < 0) {
    *why = "its input is closed";
    return false;
  }
  // A child that is gone turns the write into SIGPIPE, which would end korch: block it around
  // the write and take a pending one back, so the write fails with EPIPE instead.
  sigset_t pipe_set, old;
  sigemptyset(&pipe_set);
  sigaddset(&pipe_set, SIGPIPE);
  pthread_sigmask(SIG_BLOCK, &pipe_set, &old);
  const std::string text = line + "\n";
  size_t done = 0;
  int err = 0;
  while (done < text.size()) {
    ssize_t n = write(in_fd_, text.data() + done, text.size() - done);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) {
      err = errno;
      break;
    }
    done += static_cast<size_t>(n);
  }
  if (err == EPIPE) {
    timespec zero{};
    sigtimedwait(&pipe_set, nullptr, &zero);
  }
  pthread_sigmask(SIG_SETMASK, &old, nullptr);
  if (err == 0) return true;
  *why = err == EPIPE ? (reap(false) ? how_it_ended() : "it closed its input") : std::string(std::strerror(err));
  return false;
}

std::optional<std::string> ChildProcess::read_line(double timeout_s, std::string* why) {
  const auto t0 = std::chrono::steady_clock::now();
  for (;;) {
    if (size_t nl = buffer_.find('\n'); nl != std::string::npos) {
      std::string line = buffer_.substr(0, nl);
      buffer_.erase(0, nl + 1);
      return line;
    }
    if (out_closed_ || out_fd_ < 0) {
      // Its stdout is closed: it has ended or is about to.
      for (int i = 0; i < 50 && !reap(false); ++i) std::this_thread::sleep_for(std::chrono::milliseconds(10));
      *why = reaped_ ? how_it_ended() : "it closed its output";
      return std::nullopt;
    }
    const double left = timeout_s - since(t0);
    if (left <= 0) {
      *why = fmt::format("no answer in {:g} s", timeout_s);
      return std::nullopt;
    }
    // Short polls: a child that exits while something it started keeps its stdout open gives no
    // end of file, so whether it still runs is checked between them.
    pollfd p{out_fd_, POLLIN, 0};
    const int r = poll(&p, 1, static_cast<int>(std::min(left * 1e3, 200.0)) + 1);
    if (r < 0 && errno != EINTR) fail_io("poll on the output of process {}: {}", pid_, std::strerror(errno));
    if (r > 0) {
      char buf[4096];
      ssize_t n = read(out_fd_, buf, sizeof buf);
      if (n > 0) buffer_.append(buf, static_cast<size_t>(n));
      else if (n == 0 || errno != EINTR) out_closed_ = true;
      continue;
    }
    if (r == 0 && reap(false)) {
      // Gone: whatever it wrote before it ended is still in the pipe.
      for (;;) {
        pollfd q{out_fd_, POLLIN, 0};
        if (poll(&q, 1, 0) <= 0) break;
        char buf[4096];
        ssize_t n = read(out_fd_, buf, sizeof buf);
        if (n <= 0) break;
        buffer_.append(buf, static_cast<size_t>(n));
      }
      out_closed_ = true;
    }
  }
}

std::string ChildProcess::end(double grace_s) {
  close_fd(in_fd_);
  if (pid_ >= 0 && !reaped_) {
    auto wait_for = [&](double s) {
      const auto t0 = std::chrono::steady_clock::now();
      while (!reap(false) && since(t0) < s) std::this_thread::sleep_for(std::chrono::milliseconds(10));
      return reaped_;
    };
    if (!wait_for(grace_s)) {
      kill(pid_, SIGTERM);
      if (!wait_for(2)) {
        kill(pid_, SIGKILL);
        reap(true);
      }
    }
  }
  close_fd(out_fd_);
  return pid_ < 0 ? "not started" : how_it_ended();
}

}  // namespace korch

// A real S3-compatible server for the C++ tests: SeaweedFS's `weed server -s3`, started on free
// loopback ports with its data in a temporary directory, killed when the Weed goes. The binary
// is `$PATCHBOX_WEED`, else `weed` on `PATH`; without one (or when it does not start),
// Weed::start() returns std::nullopt and says why, and the test skips (`.ci/run` builds the
// binary and exports PATCHBOX_WEED). The same server tests/common/weed.rs starts for Rust.
#ifndef PATCHBOX_TESTS_WEED_HPP
#define PATCHBOX_TESTS_WEED_HPP

#include <arpa/inet.h>
#include <netinet/in.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <optional>
#include <sstream>
#include <string>
#include <thread>
#include <utility>
#include <vector>

namespace testutil {

/// A running `weed server -s3`; its AWS variables are set in this process (each CTest test is
/// a process of its own) so the library's S3 client finds it.
class Weed {
 public:
  /// Starts a server with its data under @p data, waits (bounded) until its gateway answers
  /// and @p bucket takes writes, and sets the AWS variables. std::nullopt, with @p why set,
  /// when there is no binary or it does not come up.
  static std::optional<Weed> start(const std::filesystem::path& data, const std::string& bucket,
                                   std::string& why) {
    std::filesystem::path bin = binary();
    if (bin.empty()) {
      why = "no weed binary (set PATCHBOX_WEED or put SeaweedFS's weed on PATH; .ci/run builds it)";
      return std::nullopt;
    }
    std::filesystem::create_directories(data);
    Weed w;
    w.ports_ = free_ports(8);
    w.pid_ = spawn(bin, data, w.ports_);
    if (w.pid_ <= 0) {
      why = "weed could not be started: " + bin.string();
      return std::nullopt;
    }
    if (!w.until_ok("PUT", "/" + bucket) || !w.until_ok("PUT", "/" + bucket + "/.probe")) {
      why = "weed did not take writes; see " + (data / "weed.log").string();
      return std::nullopt;
    }
    const std::string endpoint = "http://127.0.0.1:" + std::to_string(w.ports_[0]);
    ::setenv("AWS_ENDPOINT_URL", endpoint.c_str(), 1);
    ::setenv("AWS_ACCESS_KEY_ID", "patchbox-test", 1);
    ::setenv("AWS_SECRET_ACCESS_KEY", "patchbox-test-secret", 1);
    ::setenv("AWS_REGION", "us-east-1", 1);
    ::setenv("AWS_ALLOW_HTTP", "true", 1);
    return std::optional<Weed>(std::move(w));
  }

  Weed(Weed&& o) noexcept : pid_(std::exchange(o.pid_, -1)), ports_(std::move(o.ports_)) {}
  Weed& operator=(Weed&& o) noexcept {
    if (this != &o) {
      stop();
      pid_ = std::exchange(o.pid_, -1);
      ports_ = std::move(o.ports_);
    }
    return *this;
  }
  Weed(const Weed&) = delete;
  Weed& operator=(const Weed&) = delete;
  ~Weed() { stop(); }

 private:
  Weed() = default;

  // Kills the server at once (SIGKILL) and reaps it.
  void stop() {
    if (pid_ > 0) {
      ::kill(pid_, SIGKILL);
      ::waitpid(pid_, nullptr, 0);
      pid_ = -1;
    }
  }

  static std::filesystem::path binary() {
    if (const char* p = std::getenv("PATCHBOX_WEED"); p && *p) {
      return std::filesystem::is_regular_file(p) ? std::filesystem::path(p) : std::filesystem::path();
    }
    std::istringstream path(std::getenv("PATH") ? std::getenv("PATH") : "");
    for (std::string dir; std::getline(path, dir, ':');) {
      std::filesystem::path c = std::filesystem::path(dir) / "weed";
      if (!dir.empty() && std::filesystem::is_regular_file(c)) return c;
    }
    return {};
  }

  // Held together so no two are the same, then released for the server to take.
  static std::vector<int> free_ports(int n) {
    std::vector<int> fds, ports;
    for (int i = 0; i < n; ++i) {
      int fd = ::socket(AF_INET, SOCK_STREAM, 0);
      sockaddr_in a{};
      a.sin_family = AF_INET;
      a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
      socklen_t len = sizeof a;
      ::bind(fd, reinterpret_cast<sockaddr*>(&a), sizeof a);
      ::getsockname(fd, reinterpret_cast<sockaddr*>(&a), &len);
      fds.push_back(fd);
      ports.push_back(ntohs(a.sin_port));
    }
    for (int fd : fds) ::close(fd);
    return ports;
  }

  static pid_t spawn(const std::filesystem::path& bin, const std::filesystem::path& data,
                     const std::vector<int>& p) {
    std::vector<std::string> args = {
        bin.string(), "server", "-s3", "-dir=" + data.string(), "-ip=127.0.0.1",
        "-ip.bind=127.0.0.1",
        "-s3.port=" + std::to_string(p[0]), "-s3.port.grpc=" + std::to_string(p[1]),
        "-master.port=" + std::to_string(p[2]), "-master.port.grpc=" + std::to_string(p[3]),
        "-volume.port=" + std::to_string(p[4]), "-volume.port.grpc=" + std::to_string(p[5]),
        "-filer.port=" + std::to_string(p[6]), "-filer.port.grpc=" + std::to_string(p[7]),
        "-s3.port.iceberg=0", "-s3.port.lance=0", "-master.volumeSizeLimitMB=64",
        "-volume.max=100"};
    const std::string log = (data / "weed.log").string();
    pid_t pid = ::fork();
    if (pid == 0) {
      std::vector<char*> argv;
      for (auto& a : args) argv.push_back(a.data());
      argv.push_back(nullptr);
      if (FILE* f = std::fopen(log.c_str(), "w")) {
        ::dup2(::fileno(f), 1);
        ::dup2(::fileno(f), 2);
      }
      ::execv(argv[0], argv.data());
      ::_exit(127);
    }
    return pid;
  }

  // Sends the request until it is answered with 200 (bounded: two minutes, as in Rust).
  bool until_ok(const std::string& method, const std::string& path) const {
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::minutes(2);
    while (request(method, path) != 200) {
      if (std::chrono::steady_clock::now() > deadline || ::waitpid(pid_, nullptr, WNOHANG) != 0) {
        return false;
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(200));
    }
    return true;
  }

  // One plain HTTP/1.1 request with no body; its status, or 0 when nothing answers.
  int request(const std::string& method, const std::string& path) const {
    int fd = ::socket(AF_INET, SOCK_STREAM, 0);
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_port = htons(static_cast<uint16_t>(ports_[0]));
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    int status = 0;
    if (::connect(fd, reinterpret_cast<sockaddr*>(&a), sizeof a) == 0) {
      const std::string req = method + " " + path + " HTTP/1.1\r\nHost: 127.0.0.1:" +
                              std::to_string(ports_[0]) +
                              "\r\nContent-Length: 0\r\nConnection: close\r\n\r\n";
      timeval tv{10, 0};
      ::setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
      char head[12];
      size_t got = 0;
      if (::write(fd, req.data(), req.size()) == static_cast<ssize_t>(req.size())) {
        while (got < sizeof head) {
          ssize_t n = ::read(fd, head + got, sizeof head - got);
          if (n <= 0) break;
          got += static_cast<size_t>(n);
        }
      }
      if (got == sizeof head) status = std::atoi(std::string(head + 9, 3).c_str());
    }
    ::close(fd);
    return status;
  }

  pid_t pid_ = -1;
  std::vector<int> ports_;
};

}  // namespace testutil

#endif  // PATCHBOX_TESTS_WEED_HPP

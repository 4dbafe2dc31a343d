// SPDX-License-Identifier: Apache-2.0
#include <algorithm>
#include <cctype>
#include <chrono>
#include <functional>
#include <random>
#include <string>
#include <utility>

#include <fmt/format.h>
#include <spdlog/spdlog.h>
#include <boost/asio/as_tuple.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/this_coro.hpp>
#include <boost/asio/use_awaitable.hpp>

#include "slurm/client.h"
#include "slurm/codec.h"
#include "slurm/job_list_scanner.h"

namespace sb::slurm {
namespace {

using net::HttpRequest;
using net::HttpResponse;
using net::Method;

// Slurm error numbers the classification knows (slurm_errno.h).
constexpr int kProtocolAuthError = 1007;
constexpr int kInvalidPartition = 2000;
constexpr int kAccessDenied = 2002;
constexpr int kNodesBusy = 2016;
constexpr int kInvalidJobId = 2017;
constexpr int kInvalidNodeName = 2018;
constexpr int kAlreadyDone = 2021;
constexpr int kJobNotPending = 2073;
constexpr int kJobNotRunning = 2085;

bool IsOk(int status) { return status >= 200 && status < 300; }

// The largest error reply read whole on the streamed path (ScanJobs): slurmrestd's are about
// 1 KB; a longer one is cut, and classified by its HTTP status.
constexpr std::size_t kErrorBodyLimit = std::size_t{1} << 20;

// GET /jobs/, or /jobs/?update_time=T (ListJobsSince, ScanJobs).
std::string JobsPath(std::int64_t update_time) {
  return update_time > 0 ? "/jobs/?update_time=" + std::to_string(update_time) : "/jobs/";
}

// A full list was asked for (update_time <= 0): an empty one means no jobs, never "unchanged".
Result<JobList> SinceRule(Result<JobList> list, std::int64_t update_time) {
  if (list && update_time <= 0) list->unchanged = false;
  return list;
}

// Slurm's answer for a node it does not know (GET /node/{name}): error number 0 ("No error"),
// description "Failure to query node <name>"; or ESLURM_INVALID_NODE_NAME.
bool IsUnknownNode(const std::vector<ErrorDetail>& errors, std::string_view name) {
  return !errors.empty() && std::all_of(errors.begin(), errors.end(), [&](const ErrorDetail& e) {
    return e.number == kInvalidNodeName ||
           (e.number == 0 && e.description == "Failure to query node " + std::string(name));
  });
}

std::string Snippet(std::string_view body) {
  std::string s(body.substr(0, 200));
  std::replace(s.begin(), s.end(), '\n', ' ');
  return s;
}

class ClientImpl final : public Client {
 public:
  ClientImpl(std::unique_ptr<net::HttpClient> http, ClientConfig config, TokenSourcePtr tokens)
      : http_(std::move(http)), config_(std::move(config)), tokens_(std::move(tokens)) {
    version_ = config_.version;
  }

  Task<ApiVersion> Version() override {
    if (version_) {
      co_return *version_;
    }
    Result<ApiVersion> v = co_await Negotiate();
    if (v) {
      version_ = *v;
    }
    co_return v;
  }

  Task<std::vector<PingResult>> Ping() override {
    co_return co_await Fetch("ping", Method::kGet, "/ping/", "", DecodePings);
  }

  Task<JobSubmitResult> SubmitJob(JobDescription job) override {
    co_return co_await Submit(EncodeJobSubmit(job));
  }

  Task<JobSubmitResult> SubmitHetJob(std::vector<JobDescription> components) override {
    if (components.empty()) {
      co_return MakeError(ErrorCode::kInvalidArgument, "submit job: no components", 0);
    }
    co_return co_await Submit(EncodeHetJobSubmit(components));
  }

  Task<std::vector<JobInfo>> GetJobRecords(std::int64_t job_id) override {
    const std::string op = "get job " + std::to_string(job_id);
    auto jobs = co_await Fetch(op, Method::kGet, "/job/" + std::to_string(job_id), "", DecodeJobs);
    if (!jobs) {
      co_return tl::unexpected(jobs.error());
    }
    if (jobs->empty()) {
      co_return MakeError(ErrorCode::kNotFound, op + ": no such job", 200);
    }
    co_return std::move(*jobs);
  }

  Task<JobSubmitResult> Submit(std::string body) {
    auto r = co_await Call("submit job", Method::kPost, "/job/submit", std::move(body));
    if (!r) {
      co_return tl::unexpected(r.error());
    }
    auto reply = DecodeSubmit(r->body);
    if (!reply) {
      co_return tl::unexpected(reply.error());
    }
    if (IsOk(r->status) && reply->value.job_id > 0 && !reply->errors.empty()) {
      // The job exists: an error slurmrestd added (a failed job_submit plugin message, a
      // warning-level error) must not make the caller submit a second one.
      for (const ErrorDetail& e : reply->errors) {
        std::string text = "error reported with job " + std::to_string(reply->value.job_id) + ": " +
                           (e.description.empty() ? e.error : e.description) + " (error " +
                           std::to_string(e.number) + ")";
        spdlog::warn("slurm: submit job: {}", text);
        reply->warnings.push_back(std::move(text));
      }
      reply->errors.clear();
    }
    if (!IsOk(r->status) || !reply->errors.empty()) {
      co_return tl::unexpected(
          ClassifySlurmError("submit job", r->status, std::move(reply->errors), r->body));
    }
    if (reply->value.job_id <= 0) {
      // A body slurmrestd could not read (a wrong JSON type) answers 200 with only warnings.
      std::string why = "slurmrestd accepted the request but created no job";
      for (const auto& w : reply->warnings) {
        why += "; " + w;
      }
      co_return MakeError(ErrorCode::kInvalidArgument, "submit job: " + why, r->status);
    }
    reply->value.warnings = std::move(reply->warnings);
    co_return std::move(reply->value);
  }

  Task<JobInfo> GetJob(std::int64_t job_id) override {
    const std::string op = "get job " + std::to_string(job_id);
    auto jobs = co_await Fetch(op, Method::kGet, "/job/" + std::to_string(job_id), "", DecodeJobs);
    if (!jobs) {
      co_return tl::unexpected(jobs.error());
    }
    if (jobs->empty()) {  // upstream's contract too: an empty list is "not found"
      co_return MakeError(ErrorCode::kNotFound, op + ": no such job", 200);
    }
    co_return std::move(jobs->front());
  }

  Task<std::vector<JobInfo>> ListJobs() override {
    co_return co_await Fetch("list jobs", Method::kGet, "/jobs/", "", DecodeJobs,
                             ErrorCode::kInvalidArgument, /*job_list=*/true);
  }

  Task<JobList> ListJobsSince(std::int64_t update_time) override {
    co_return SinceRule(co_await Fetch("list jobs", Method::kGet, JobsPath(update_time), "",
                                       DecodeJobList, ErrorCode::kInvalidArgument,
                                       /*job_list=*/true),
                        update_time);
  }

  // ListJobsSince's request, its reply decoded as it arrives (JobListScanner): the same
  // headers, token refresh, version, limits and error mapping (Call), the body streamed.
  Task<JobList> ScanJobs(std::int64_t update_time, JobFilter keep) override {
    const std::string op = "list jobs";
    JobListScanner scanner(std::move(keep), config_.jobs_body_limit);
    auto r =
        co_await Call(op, Method::kGet, JobsPath(update_time), "", /*job_list=*/true, &scanner);
    if (!r) {
      co_return tl::unexpected(r.error());
    }
    // An error status's body was read whole (StreamTo): decoded as Fetch decodes it.
    Result<Reply<JobList>> reply = IsOk(r->status) ? scanner.Finish() : DecodeJobList(r->body);
    co_return SinceRule(Decoded(op, *r, std::move(reply)), update_time);
  }

  Task<std::vector<JobStateEntry>> JobStates(std::vector<std::int64_t> job_ids) override {
    std::vector<JobStateEntry> out;
    for (std::string& path : JobStatePaths(job_ids)) {
      auto part = co_await Fetch("job states", Method::kGet, std::move(path), "", DecodeJobStates,
                                 ErrorCode::kInvalidArgument, /*job_list=*/true);
      if (!part) {
        co_return tl::unexpected(part.error());
      }
      std::move(part->begin(), part->end(), std::back_inserter(out));
    }
    co_return out;
  }

  Task<bool> UpdateJob(std::int64_t job_id, JobDescription changes) override {
    const std::string op = "update job " + std::to_string(job_id);
    co_return co_await Fetch(op, Method::kPost, "/job/" + std::to_string(job_id),
                             EncodeJobDescription(changes), DecodeStatusOnly);
  }

  Task<bool> CancelJob(std::int64_t job_id, CancelOptions options) override {
    const std::string op = "cancel job " + std::to_string(job_id);
    std::string query;
    if (!options.signal.empty()) {
      query += "?signal=" + options.signal;
    }
    if (!options.flags.empty()) {
      std::string flags;
      for (const auto& f : options.flags) {
        flags += (flags.empty() ? "" : ",") + f;
      }
      query += (query.empty() ? "?flags=" : "&flags=") + flags;
    }
    co_return co_await Fetch(op, Method::kDelete, "/job/" + std::to_string(job_id) + query, "",
                             DecodeCancel);
  }

  Task<std::vector<NodeAllocation>> JobResources(std::int64_t job_id) override {
    const std::string op = "resources of job " + std::to_string(job_id);
    if (auto v = co_await Version(); v && *v < ApiVersion::kV0044) {
      co_return MakeError(ErrorCode::kUnimplemented,
                          op + ": /resources/ needs data_parser v0.0.44 or newer, server uses " +
                              std::string(ApiVersionName(*v)));
    }
    co_return co_await Fetch(op, Method::kGet, "/resources/" + std::to_string(job_id), "",
                             DecodeResources);
  }

  Task<std::vector<NodeInfo>> ListNodes() override {
    co_return co_await Fetch("list nodes", Method::kGet, "/nodes/", "", DecodeNodes);
  }

  Task<NodeInfo> GetNode(std::string name) override {
    const std::string op = "get node " + name;
    auto r = co_await Call(op, Method::kGet, "/node/" + name, "");
    if (!r) {
      co_return tl::unexpected(r.error());
    }
    Result<Reply<std::vector<NodeInfo>>> reply = DecodeNodes(r->body);
    // An unknown node answers 200 with an error of number 0 and the description "Failure to
    // query node <name>"; any other error inside a 2xx (slurmctld unreachable, a failed RPC) is
    // an error, not a missing node: a caller that took it for NotFound would treat a Slurm node
    // as a plain Kubernetes node.
    if (IsOk(r->status) && reply && reply->value.empty() && IsUnknownNode(reply->errors, name)) {
      co_return MakeError(ErrorCode::kNotFound, op + ": no such node", r->status);
    }
    auto nodes = Decoded(op, *r, std::move(reply), ErrorCode::kUnavailable);
    if (!nodes) {
      co_return tl::unexpected(nodes.error());
    }
    auto it = std::find_if(nodes->begin(), nodes->end(),
                           [&](const NodeInfo& n) { return n.name == name; });
    if (it == nodes->end()) {
      co_return MakeError(ErrorCode::kNotFound, op + ": no such node", 200);
    }
    co_return std::move(*it);
  }

  Task<bool> UpdateNode(std::string name, NodeUpdate update) override {
    const std::string op = "update node " + name;
    co_return co_await Fetch(op, Method::kPost, "/node/" + name, EncodeNodeUpdate(update),
                             DecodeStatusOnly);
  }

  Task<bool> CreateNode(std::string node_conf) override {
    const std::string op = "create node";
    if (auto v = co_await Version(); v && *v < ApiVersion::kV0044) {
      co_return MakeError(ErrorCode::kUnimplemented,
                          op + ": /new/node/ needs data_parser v0.0.44 or newer, server uses " +
                              std::string(ApiVersionName(*v)));
    }
    co_return co_await Fetch(op, Method::kPost, "/new/node/", EncodeNewNode(node_conf),
                             DecodeStatusOnly);
  }

  Task<bool> DeleteNode(std::string name) override {
    const std::string op = "delete node " + name;
    co_return co_await Fetch(op, Method::kDelete, "/node/" + name, "", DecodeStatusOnly,
                             ErrorCode::kNotFound);
  }

  Task<std::vector<PartitionInfo>> ListPartitions() override {
    co_return co_await Fetch("list partitions", Method::kGet, "/partitions/", "", DecodePartitions);
  }

  Task<PartitionInfo> GetPartition(std::string name) override {
    const std::string op = "get partition " + name;
    auto parts = co_await Fetch(op, Method::kGet, "/partition/" + name, "", DecodePartitions,
                                ErrorCode::kNotFound);
    if (!parts) {
      co_return tl::unexpected(parts.error());
    }
    if (parts->empty()) {
      co_return MakeError(ErrorCode::kNotFound, op + ": no such partition", 200);
    }
    co_return std::move(parts->front());
  }

  Task<std::vector<ReservationInfo>> ListReservations() override {
    co_return co_await Fetch("list reservations", Method::kGet, "/reservations/", "",
                             DecodeReservations);
  }

  Task<std::vector<Share>> Shares(std::string accounts, std::string users) override {
    if (auto v = co_await Version(); v && *v < ApiVersion::kV0044) {
      co_return MakeError(ErrorCode::kUnimplemented, "shares: needs data_parser v0.0.44 or newer");
    }
    std::string query;
    auto add = [&](std::string_view key, const std::string& value) {
      if (value.empty()) return;
      query += query.empty() ? "?" : "&";
      query += key;
      query += '=';
      for (const char ch : value) {
        const auto c = static_cast<unsigned char>(ch);
        if (std::isalnum(c) != 0 || c == '-' || c == '_' || c == '.' || c == '~') {
          query += ch;
        } else {
          static constexpr char kHex[] = "0123456789ABCDEF";
          query += '%';
          query += kHex[c >> 4];
          query += kHex[c & 15];
        }
      }
    };
    add("accounts", accounts);
    add("users", users);
    co_return co_await Fetch("shares", Method::kGet, "/shares" + query, "", DecodeShares);
  }

  const net::ClientStats& http_stats() const override { return http_->stats(); }

 private:
  // Turns a decoded reply into its value, or the classified error. `errors_on_ok` is the code
  // for errors[] inside a 2xx reply whose error numbers say nothing (slurmrestd's "No error").
  template <typename T>
  Result<T> Decoded(const std::string& op, const HttpResponse& res, Result<Reply<T>> reply,
                    ErrorCode errors_on_ok = ErrorCode::kInvalidArgument) {
    if (!IsOk(res.status)) {
      return tl::unexpected(ClassifySlurmError(
          op, res.status, reply ? std::move(reply->errors) : std::vector<ErrorDetail>{}, res.body));
    }
    if (!reply) {
      Error e = reply.error();
      e.message = op + ": " + e.message;
      e.http_status = res.status;
      return tl::unexpected(std::move(e));
    }
    if (!reply->errors.empty()) {
      Error e = ClassifySlurmError(op, res.status, std::move(reply->errors), res.body);
      if (e.code == ErrorCode::kInternal) {
        e.code = errors_on_ok;
      }
      return tl::unexpected(std::move(e));
    }
    return std::move(reply->value);
  }

  // One request and its decoded reply, or the classified error.
  template <typename T>
  Task<T> Fetch(std::string op, Method method, std::string path, std::string body,
                Result<Reply<T>> (*decode)(std::string_view),
                ErrorCode errors_on_ok = ErrorCode::kInvalidArgument, bool job_list = false) {
    auto r = co_await Call(op, method, std::move(path), std::move(body), job_list);
    if (!r) {
      co_return tl::unexpected(r.error());
    }
    co_return Decoded(op, *r, decode(r->body), errors_on_ok);
  }

  // Sends one request to /slurm/<version><path> with the token; on 401/511 re-reads the token
  // and tries once more. With `stream` set, the reply is read by StreamTo.
  Task<HttpResponse> Call(std::string op, Method method, std::string path, std::string body,
                          bool job_list = false, JobListScanner* stream = nullptr) {
    Result<ApiVersion> version = co_await Version();
    if (!version) {
      co_return tl::unexpected(version.error());
    }
    std::string target = "/slurm/" + std::string(ApiVersionName(*version)) + path;
    co_return co_await Send(std::move(op), method, std::move(target), std::move(body), job_list,
                            stream);
  }

  Task<HttpResponse> Send(std::string op, Method method, std::string target, std::string body,
                          bool job_list = false, JobListScanner* stream = nullptr) {
    for (int attempt = 0;; ++attempt) {
      Result<std::string> token = tokens_->Token();
      if (!token) {
        Error e = token.error();
        e.message = op + ": " + e.message;
        co_return tl::unexpected(std::move(e));
      }
      HttpRequest req{.method = method, .target = target, .headers = {}, .body = body};
      if (job_list) {  // every job slurmctld knows: larger and slower than other replies
        req.body_limit = config_.jobs_body_limit;
        req.timeout = config_.jobs_timeout;
      }
      req.headers.push_back({"X-SLURM-USER-TOKEN", *token});
      if (!config_.user_name.empty()) {
        req.headers.push_back({"X-SLURM-USER-NAME", config_.user_name});
      }
      req.headers.push_back({"Accept", "application/json"});
      if (!body.empty()) {
        req.headers.push_back({"Content-Type", "application/json"});
      }
      Result<HttpResponse> res;
      if (stream != nullptr) {
        res = co_await StreamTo(std::move(req), *stream);
      } else {
        res = co_await http_->Send(std::move(req));
      }
      if (!res) {
        Error e = res.error();
        e.message = op + ": " + e.message;
        co_return tl::unexpected(std::move(e));
      }
      if ((res->status == 401 || res->status == 511) && attempt == 0) {
        tokens_->Invalidate();  // rotated under us? re-read and try once more
        continue;
      }
      co_return res;
    }
  }

  // http_->Send(req) for a reply decoded as it arrives: a 2xx body goes to `scanner` piece by
  // piece (the HttpResponse returned has none); another status's body is read into the
  // HttpResponse, up to kErrorBodyLimit, for the error's classification. As in Send, the
  // request's timeout bounds the whole exchange with its retries, and a GET is retried after a
  // transport failure other than a timeout and on 502/503/504, with backoff, up to
  // http.max_attempts (HttpClient::Stream itself never retries); a retry reads the body again
  // from its start (scanner.Restart()). The body's limit is the scanner's (jobs_body_limit).
  // Each wait for a piece is bounded by what is left of the timeout at the attempt's start, so a
  // server that stalls can overrun it by at most that much; pieces that keep coming stop at it.
  Task<HttpResponse> StreamTo(HttpRequest req, JobListScanner& scanner) {
    using Clock = std::chrono::steady_clock;
    const auto timeout = req.timeout.count() > 0 ? req.timeout : config_.http.timeout;
    const Clock::time_point deadline = Clock::now() + timeout;
    auto left = [&] {
      return std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now());
    };
    for (int attempt = 0;; ++attempt) {
      scanner.Restart();
      HttpResponse res;
      bool late = false;
      std::function<bool(const HttpResponse&)> on_headers = [&res](const HttpResponse& head) {
        res.status = head.status;
        res.headers = head.headers;
        return true;
      };
      std::function<bool(std::string_view)> on_data = [&](std::string_view piece) {
        if (Clock::now() > deadline) {
          late = true;
          return false;
        }
        if (IsOk(res.status)) return scanner.Feed(piece);
        res.body.append(piece.substr(0, kErrorBodyLimit - res.body.size()));
        return res.body.size() < kErrorBodyLimit;
      };
      HttpRequest one = req;
      one.timeout = std::max(left(), std::chrono::milliseconds(1));
      one.body_limit = 0;  // the scanner counts (its error says how many jobs were read)
      Result<int> status =
          co_await http_->Stream(std::move(one), std::move(on_headers), std::move(on_data));
      if (late) {
        co_return MakeError(ErrorCode::kDeadlineExceeded,
                            "read from " + http_->endpoint().ToString() + ": timed out after " +
                                std::to_string(timeout.count()) + " ms (" +
                                std::to_string(scanner.entries()) + " jobs read)");
      }
      const std::chrono::milliseconds wait = Backoff(attempt);
      const bool retry_safe =
          IsIdempotent(req.method) && attempt + 1 < config_.http.max_attempts && left() > wait;
      if (status) {
        if (!(retry_safe && (res.status == 502 || res.status == 503 || res.status == 504))) {
          co_return res;
        }
      } else if (!(retry_safe && status.error().code == ErrorCode::kUnavailable)) {
        co_return tl::unexpected(status.error());
      }
      boost::asio::steady_timer timer(co_await boost::asio::this_coro::executor, wait);
      co_await timer.async_wait(boost::asio::as_tuple(boost::asio::use_awaitable));
    }
  }

  // As net::HttpClient's: doubling from http.backoff_base up to http.backoff_max, jittered down
  // to half.
  std::chrono::milliseconds Backoff(int retry) {
    const std::int64_t base = config_.http.backoff_base.count() << std::min(retry, 16);
    const std::int64_t capped = std::min<std::int64_t>(base, config_.http.backoff_max.count());
    std::uniform_int_distribution<std::int64_t> jitter(capped / 2,
                                                       std::max<std::int64_t>(capped, 1));
    return std::chrono::milliseconds(jitter(rng_));
  }

  // Newest version the server offers: from /openapi/v3 when it answers, else by probing ping.
  Task<ApiVersion> Negotiate() {
    auto spec = co_await Send("read OpenAPI document", Method::kGet, "/openapi/v3", "");
    if (spec && IsOk(spec->status)) {
      Result<std::vector<ApiVersion>> offered = DecodeOpenApiVersions(spec->body);
      if (offered && !offered->empty()) {
        co_return offered->front();
      }
      co_return MakeError(ErrorCode::kUnimplemented,
                          "slurmrestd at " + http_->endpoint().ToString() +
                              " offers none of data_parser v0.0.42-v0.0.45" +
                              (offered ? "" : " (" + offered.error().message + ")"));
    }
    if (spec && (spec->status == 401 || spec->status == 511)) {
      co_return tl::unexpected(
          ClassifySlurmError("read OpenAPI document", spec->status, {}, spec->body));
    }
    // Only a 404 says "not here": any other answer (a slurmrestd still starting, a proxy in
    // front of a stopped one) says nothing of the versions offered, and falling through to an
    // older one would pin it for the process's life. An error instead: the next call asks again.
    auto unsettled = [&](std::string_view what, int status) {
      return Error{ErrorCode::kUnavailable,
                   fmt::format("slurmrestd at {}: {} answered HTTP {}; the API version is asked "
                               "again at the next call",
                               http_->endpoint().ToString(), what, status),
                   status};
    };
    if (!spec) co_return tl::unexpected(spec.error());
    if (spec->status != 404) co_return tl::unexpected(unsettled("/openapi/v3", spec->status));
    Error last{ErrorCode::kUnimplemented, "no OpenAPI document", spec->status};
    for (ApiVersion v : AllApiVersions()) {
      const std::string path = "/slurm/" + std::string(ApiVersionName(v)) + "/ping/";
      auto ping = co_await Send("probe API version", Method::kGet, path, "");
      if (!ping) {
        co_return tl::unexpected(ping.error());
      }
      if (IsOk(ping->status)) {
        co_return v;
      }
      if (ping->status != 404) co_return tl::unexpected(unsettled(path, ping->status));
    }
    last.message = "slurmrestd at " + http_->endpoint().ToString() +
                   " offers none of data_parser v0.0.42-v0.0.45 (" + last.message + ")";
    co_return tl::unexpected(std::move(last));
  }

  std::unique_ptr<net::HttpClient> http_;
  ClientConfig config_;
  TokenSourcePtr tokens_;
  std::optional<ApiVersion> version_;
  std::minstd_rand rng_{std::random_device{}()};
};

}  // namespace

std::vector<std::string> JobStatePaths(const std::vector<std::int64_t>& job_ids) {
  std::vector<std::string> paths;
  std::string query;
  for (std::int64_t id : job_ids) {
    std::string param = (query.empty() ? "?job_id=" : "&job_id=") + std::to_string(id);
    if (!query.empty() && query.size() + param.size() > kJobStateQueryBytes) {
      paths.push_back("/jobs/state/" + query);
      query.clear();
      param = "?job_id=" + std::to_string(id);
    }
    query += param;
  }
  if (!query.empty() || paths.empty()) {
    paths.push_back("/jobs/state/" + query);
  }
  return paths;
}

Error ClassifySlurmError(std::string_view operation, int http_status,
                         std::vector<ErrorDetail> errors, std::string_view body) {
  Error e;
  e.http_status = http_status;
  std::string what;
  if (!errors.empty()) {
    const ErrorDetail& first = errors.front();
    what = first.error.empty() || first.error == "No error" ? first.description : first.error;
    if (!first.description.empty() && what != first.description) {
      what += " (" + first.description + ")";
    }
    switch (first.number) {
      case kInvalidJobId:
      case kInvalidNodeName:
        e.code = ErrorCode::kNotFound;
        break;
      case kProtocolAuthError:
        e.code = ErrorCode::kUnauthenticated;
        break;
      case kAccessDenied:
        e.code = ErrorCode::kPermissionDenied;
        break;
      case kJobNotPending:
      case kJobNotRunning:
      case kAlreadyDone:
        e.code = ErrorCode::kFailedPrecondition;
        break;
      case kNodesBusy:
        e.code = ErrorCode::kUnavailable;
        break;
      case kInvalidPartition:
        e.code = ErrorCode::kInvalidArgument;
        break;
      default:
        if (IsOk(http_status)) {
          e.code = ErrorCode::kInternal;  // the caller decides what errors in a 2xx mean
        } else if (http_status == 422 || (first.number >= 2000 && first.number < 3000)) {
          e.code = ErrorCode::kInvalidArgument;
        } else {
          e.code = ErrorCodeFromHttpStatus(http_status);
        }
    }
  } else {
    e.code = IsOk(http_status) ? ErrorCode::kInternal : ErrorCodeFromHttpStatus(http_status);
    what = "HTTP " + std::to_string(http_status) + ": " + Snippet(body);
  }
  e.message = std::string(operation) + ": " + what;
  e.details = std::move(errors);
  return e;
}

Task<JobSubmitResult> Client::SubmitHetJob(std::vector<JobDescription> /*components*/) {
  co_return MakeError(ErrorCode::kUnimplemented, "this Slurm client submits no heterogeneous jobs");
}

Task<std::vector<Share>> Client::Shares(std::string /*accounts*/, std::string /*users*/) {
  co_return MakeError(ErrorCode::kUnimplemented, "this Slurm client reads no shares");
}

Task<JobList> Client::ScanJobs(std::int64_t update_time, JobFilter keep) {
  Result<JobList> list = co_await ListJobsSince(update_time);
  if (list && keep) std::erase_if(list->jobs, [&](const JobInfo& j) { return !keep(j); });
  co_return list;
}

Task<std::vector<JobInfo>> Client::GetJobRecords(std::int64_t job_id) {
  Result<JobInfo> job = co_await GetJob(job_id);
  if (!job) co_return tl::unexpected(job.error());
  co_return std::vector<JobInfo>{std::move(*job)};
}

Result<ClientPtr> MakeClient(boost::asio::any_io_executor executor, ClientConfig config,
                             TokenSourcePtr tokens) {
  if (!tokens) {
    return MakeError(ErrorCode::kInvalidArgument, "no Slurm token source");
  }
  Result<net::Endpoint> ep = net::ParseEndpoint(config.url);
  if (!ep) {
    return tl::unexpected(ep.error());
  }
  auto http = net::HttpClient::Create(std::move(executor), *ep, config.http);
  if (!http) {
    return tl::unexpected(http.error());
  }
  return ClientPtr(
      std::make_unique<ClientImpl>(std::move(*http), std::move(config), std::move(tokens)));
}

}  // namespace sb::slurm

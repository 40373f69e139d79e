// OpenAI's error body as vLLM returns it: {"error": {"message", "type", "param", "code"}} with
// `code` the HTTP status. Every bad request becomes one of these (never an exception reaching
// the transport); the body is bounded (messages are cut, so a huge input cannot make a huge
// error: vLLM once answered a 4.5 KB body with 23.6 MB).
#pragma once

#include <string>

#include <nlohmann/json.hpp>

namespace strata::server {

struct ApiError {
  int status = 400;
  std::string message;
  std::string type = "BadRequestError";  // vLLM's names: BadRequestError, NotFoundError, ...
  std::string param;                     // the offending parameter; empty -> null

  nlohmann::json body() const;
  std::string body_text() const;  // body().dump(), at most ~2 KB
};

// Longest message kept in an error body (bytes, cut at a UTF-8 boundary with "...").
constexpr size_t kMaxErrorMessageBytes = 1024;

ApiError bad_request(std::string message, std::string param = {});      // 400
ApiError model_not_found(const std::string& model);                     // 404, param model
ApiError not_found(std::string message);                                // 404 (routes)
ApiError method_not_allowed(std::string message);                       // 405
ApiError unauthorized();                                                // 401
ApiError payload_too_large(size_t limit_bytes);                         // 413
ApiError service_unavailable(std::string message);                      // 503
ApiError not_implemented(std::string message, std::string param = {});  // 501
ApiError internal_error(std::string message);                           // 500

// A JSON dump that never throws: invalid UTF-8 (which a stream cannot contain, but a
// hand-built value might) is replaced with U+FFFD.
std::string dump_json(const nlohmann::json& j);
std::string dump_json(const nlohmann::ordered_json& j);

}  // namespace strata::server
